"""The `captain` command. Subcommands live in the packages that own them and are mounted
here lazily, so that `captain --help` stays fast and a missing optional dependency only
disables its own subcommand."""
