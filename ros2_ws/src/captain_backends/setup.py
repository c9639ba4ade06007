"""ament_python package captain_backends (also installable with pip -e)."""

from glob import glob

from setuptools import find_packages, setup

PACKAGE = "captain_backends"

setup(
    name=PACKAGE,
    version="0.1.0",
    packages=find_packages(exclude=["test", "test.*"]),
    data_files=[
        ("share/ament_index/resource_index/packages", [f"resource/{PACKAGE}"]),
        (f"share/{PACKAGE}", ["package.xml"]),
        (f"share/{PACKAGE}/config", glob("config/*.yaml")),
    ],
    package_data={"": ["*.xml", "*.srdf", "*.urdf", "*.yaml", "*.md", "*.jinja", "*.json"]},
    install_requires=["setuptools"],
    zip_safe=False,
    maintainer="CaPtain maintainers",
    maintainer_email="maintainers@captain-stack.org",
    description=(
        "Robot drivers under one interface: mock, MuJoCo tabletop, LIBERO, XR1 (real, over "
        "ros2_control topics) and its MuJoCo twin."
    ),
    license="Apache-2.0",
    python_requires=">=3.11",
    entry_points={
        "captain.drivers": [
            "mock = captain_backends.core.mock:MockDriver",
            "tabletop = captain_backends.core.tabletop.driver:TabletopDriver",
            "libero = captain_backends.core.libero.driver:LiberoDriver",
            "xr1 = captain_backends.core.xr1.driver:XR1Driver",
        ],
        "console_scripts": [
            "xr1_fake_hardware = captain_backends.nodes.xr1_fake_hardware:main",
            "xr1_twin = captain_backends.nodes.xr1_twin:main",
        ],
    },
)
