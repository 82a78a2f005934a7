"""Local training of clients (plain, vectorised, CUDA-graphed), its numerics, and the global model's evaluation."""
