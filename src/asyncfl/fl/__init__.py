"""The federated algorithms: strategies (what differs between algorithms) and the aggregation arithmetic."""
