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
        *([(f"share/{PACKAGE}/launch", glob("launch/*.py")),
           (f"share/{PACKAGE}/config", glob("config/*.yaml"))] if PACKAGE == "captain_bringup" else []),
    ],
    package_data={"": ["*.xml", "*.srdf", "*.urdf", "*.yaml", "*.md", "*.jinja", "*.json"]},
    install_requires=["setuptools"],
    zip_safe=False,
    maintainer="CaPtain maintainers",
    maintainer_email="maintainers@captain-stack.org",
    description="Robot drivers under one interface: mock, MuJoCo tabletop, LIBERO, XR1 (real, over ros2_control topics) and its MuJoCo twin.",
    license="Apache-2.0",
    python_requires=">=3.11",
    entry_points={
        "captain.drivers": [
            "mock = captain_backends.core.mock:MockDriver",
            "tabletop = captain_backends.core.tabletop.driver:TabletopDriver",
            "libero = captain_backends.core.libero.driver:LiberoDriver",
        ],
        "console_scripts": [
        ],
    },
)
