"""Kafka's command-line tools as ``pylog`` subcommands (see pylog.cli)."""
