"""asyncfl: asynchronous federated learning with real staleness on a virtual clock."""

__version__ = "0.1.0"
