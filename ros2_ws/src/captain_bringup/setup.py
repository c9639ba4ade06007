"""ament_python package captain_bringup (also installable with pip -e)."""

from glob import glob

from setuptools import find_packages, setup

PACKAGE = "captain_bringup"

setup(
    name=PACKAGE,
    version="0.1.0",
    packages=find_packages(exclude=["test", "test.*"]),
    data_files=[
        ("share/ament_index/resource_index/packages", [f"resource/{PACKAGE}"]),
        (f"share/{PACKAGE}", ["package.xml"]),
        (f"share/{PACKAGE}/launch", glob("launch/*.py")),
        (f"share/{PACKAGE}/config", glob("config/*.yaml")),
    ],
    package_data={"": ["*.xml", "*.srdf", "*.urdf", "*.yaml", "*.md", "*.jinja", "*.json"]},
    install_requires=["setuptools"],
    zip_safe=False,
    maintainer="CaPtain maintainers",
    maintainer_email="maintainers@captain-stack.org",
    description="Launch files, parameters and the `captain` command (sim, XR1 twin or real XR1).",
    license="Apache-2.0",
    python_requires=">=3.11",
    entry_points={
        "console_scripts": [
            "captain = captain_bringup.cli.main:main",
        ],
    },
)
