"""One module per `distagent` subcommand, each with `run(args) -> int`."""
