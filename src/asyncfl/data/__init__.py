"""Datasets as whole tensors, and their Dirichlet partitions into clients."""
