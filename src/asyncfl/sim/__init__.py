"""The simulation: clients on a virtual clock, their delays and random streams, the event-driven engine,
its checkpointed state and the checks made before it starts."""
