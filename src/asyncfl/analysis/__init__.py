"""What the runs show: the figures and the theory checks."""
