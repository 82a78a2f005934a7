"""A run folder from command line to finished outputs: its lock, logs, record and archive."""
