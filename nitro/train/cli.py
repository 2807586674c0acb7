"""``nitro train | eval | export``."""


def add_commands(sub) -> None:
    """Register the training subcommands on the ``nitro`` parser."""
