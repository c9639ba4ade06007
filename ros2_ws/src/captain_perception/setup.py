"""ament_python package captain_perception (also installable with pip -e)."""

from setuptools import find_packages, setup

PACKAGE = "captain_perception"

setup(
    name=PACKAGE,
    version="0.1.0",
    packages=find_packages(exclude=["test", "test.*"]),
    data_files=[
        ("share/ament_index/resource_index/packages", [f"resource/{PACKAGE}"]),
        (f"share/{PACKAGE}", ["package.xml"]),
    ],
    package_data={"": ["*.xml", "*.srdf", "*.urdf", "*.yaml", "*.md", "*.jinja", "*.json"]},
    install_requires=["setuptools"],
    zip_safe=False,
    maintainer="CaPtain maintainers",
    maintainer_email="maintainers@captain-stack.org",
    description=(
        "Cameras to detections and metric geometry: back-projection, point clouds, segmenters, "
        "pointing, tracking; a ROS 2 perception node."
    ),
    license="Apache-2.0",
    python_requires=">=3.11",
    entry_points={
        "captain.primitives": [
            "perception = captain_perception.core.primitives:build",
        ],
        "console_scripts": [
            "perception_node = captain_perception.nodes.perception_node:main",
        ],
    },
)
