"""`asyncfl bench`: trainer speeds, the engine's cost, the paper round and the sweep's projection."""
