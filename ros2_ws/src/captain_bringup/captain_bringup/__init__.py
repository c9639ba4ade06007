"""CaPtain bringup: launch descriptions, parameters and the `captain` command."""
