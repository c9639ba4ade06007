"""A worked example of a CaPtain driver package (see README.md)."""

from captain_example_driver.driver import ExampleArmConfig, ExampleArmDriver

__all__ = ["ExampleArmConfig", "ExampleArmDriver"]
