"""ament_python package captain_harness (also installable with pip -e)."""

from setuptools import find_packages, setup

PACKAGE = "captain_harness"

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
        "The CaPtain harness: the policy-facing robot API (22 primitives plus finish) with guarded "
        "Cartesian motion, the sandboxed session and the episode loop; ROS 2 action servers over "
        "it."
    ),
    license="Apache-2.0",
    python_requires=">=3.11",
    entry_points={
        "console_scripts": [
            "harness_node = captain_harness.nodes.harness_node:main",
            "episode_runner_node = captain_harness.nodes.episode_runner_node:main",
            "recorder_node = captain_harness.nodes.recorder_node:main",
        ],
    },
)
