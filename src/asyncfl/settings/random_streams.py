"""The seed's independent random streams: every draw of a run comes from one of these, so adding a
draw to one part of the simulation never shifts the numbers of another.

A stream is NumPy's `default_rng([seed, STREAM, ...])`: the same seed with another stream id, or
another (client, dispatch) key, is an unrelated sequence. The ids are part of every run's numbers;
changing one changes every output, so they are written here once and never renumbered.
"""

import numpy as np

SYSTEM = 0  # each client's compute speed and latency, drawn once per run (`client_system.ClientSystem`)
JITTER = 1  # the compute-time jitter of one (client, dispatch)
SAMPLING = 2  # which clients the server dispatches (`sim.state.SimulationState.rng`)
SHUFFLE = 3  # the order of one (client, dispatch)'s local epochs
SUBSET = 4  # which training samples a subset partition keeps (`partition --subset-*`)
CLIENT_INIT = 5  # each client's own initial model, for the algorithms whose clients keep their own models
NETWORK = 6  # each client's link bandwidth, drawn once per run (`network.Links`)
AVAILABILITY = 7  # each client's online and offline periods, keyed by client (`availability.Availability`)
FAILURE = 8  # whether one (client, dispatch) fails (`availability.dispatch_fails`)
CHECKINS = 9  # the times clients check in, under arrivals: poisson (`arrivals.CheckIns`)
SLOW_CLIENTS = 10  # which clients are the heavy tail's slow ones (`client_system.slowed`)
VALIDATION = 11  # which training samples the validation split holds (`holdout.Holdout`)
SPEED_CLASSES = 12  # which clients are in which device class (`client_system.classed`)
LINK_CLASSES = 13  # which clients are in which link class, and their bandwidths (`network.Links`)
TRANSFERS = 14  # one (client, dispatch)'s own transfer draws, under transfer_draws: per_dispatch (`network`)
DOWNLOADS = 15  # which clients are in which download-time class, and their times (`network.TransferTimes`)
UPLOADS = 16  # which clients are in which upload-time class, and their times (`network.TransferTimes`)
TRANSFER_JITTER = 17  # one (client, dispatch)'s download and upload jitter (`jitter.transfer_factors`)


def client_init_seed(seed: int, client: int) -> int:
    """The seed of `client`'s own initial model: drawn from the run seed's CLIENT_INIT stream, so it
    differs from the server's (the run seed) and from every other client's."""
    return int(np.random.default_rng([seed, CLIENT_INIT, client]).integers(1 << 63))


def shuffle_key(seed: int, client: int, dispatch_index: int) -> tuple[int, int, int, int]:
    """The key of the stream that shuffles `client`'s local epochs on its `dispatch_index`-th dispatch."""
    return (seed, SHUFFLE, client, dispatch_index)
