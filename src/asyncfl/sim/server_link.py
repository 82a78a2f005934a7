"""The server's own link, shared by every dispatch's transfers (`server_bandwidth`; docs/design.md "The
clients' world").

A dispatch's two transfers are booked on the link when the server makes the dispatch: the download
from then, the upload from when the client's compute ends. A transfer runs at its client's link rate,
capped at each instant by what the transfers booked before it leave of the server's capacity, and it
never slows one booked before it. So every arrival is known when its dispatch is made (the delay-aware
learning rate, the failure draw and the self-check read it then), as with a server that grants its
clients their transfer slots when it dispatches them. Processor sharing (each transfer in progress
gets an equal share, TCP's fair share) would instead move every transfer in flight at each start and
end. The link carries the same bits either way: n transfers of S bits ready at once, each client faster
than the server's B, end at S/B, 2S/B, …, n·S/B here, all at n·S/B under processor sharing; the last
ends at n·S/B in both. A lost dispatch keeps its booking: the server learns of a loss only when it
happens.
"""

import bisect
import math
from dataclasses import dataclass, field

from asyncfl.settings.errors import InputError
from asyncfl.sim.network import MAX_TRANSFER_SECONDS, MEGABIT, Links

FREE = 1e-9  # of the capacity: less left than this is none (sums of rates round by a few ulps)


@dataclass
class LinkBookings:
    """The server link's booked rate over virtual time: `used[i]` bits/s on [times[i], times[i + 1]),
    none before times[0] or from times[-1] on (used[-1] is 0). What a checkpoint keeps of the link."""

    times: list[float] = field(default_factory=list)
    used: list[float] = field(default_factory=list)

    def rate_at(self, index: int) -> float:
        return self.used[index] if index >= 0 else 0.0

    def book(self, capacity: float, ready: float, bits: float, rate: float) -> float:
        """Books a transfer of `bits` that may start at `ready`, at most `rate` bits/s and what earlier
        bookings leave of `capacity` at each instant; returns when it ends."""
        pieces, t, left = [], ready, bits
        index = bisect.bisect_right(self.times, ready) - 1  # the interval holding `ready` (-1: before all)
        while left > 0:
            ends = self.times[index + 1] if index + 1 < len(self.times) else math.inf
            free = capacity - self.rate_at(index)
            if free > capacity * FREE:  # a client's own rate may be any fraction of the capacity
                speed = min(rate, free)
                if left <= speed * (ends - t):  # it ends here (never past `ends`, whatever the rounding)
                    pieces.append((t, min(t + left / speed, ends), speed))
                    break
                pieces.append((t, ends, speed))
                left -= speed * (ends - t)
            t, index = ends, index + 1
        for start, end, speed in pieces:
            self.add(start, end, speed)
        return pieces[-1][1] if pieces else ready

    def add(self, start: float, end: float, speed: float) -> None:
        first, last = self.split(start), self.split(end)
        for index in range(first, last):
            self.used[index] += speed

    def split(self, t: float) -> int:
        """The index of a breakpoint at `t`, made where there is none (the rate before it continues)."""
        index = bisect.bisect_left(self.times, t)
        if index < len(self.times) and self.times[index] == t:
            return index
        self.times.insert(index, t)
        self.used.insert(index, self.rate_at(index - 1))
        return index

    def forget_before(self, now: float) -> None:
        """Drops the intervals that ended by `now`: no booking starts before the present."""
        drop = bisect.bisect_right(self.times, now) - 1
        if drop > 0:
            del self.times[:drop], self.used[:drop]

    def peak(self) -> float:
        return max(self.used, default=0.0)


@dataclass(frozen=True)
class ServerLink:
    """The server's link: `capacity` bits per second for all transfers together."""

    capacity: float

    @classmethod
    def of(cls, server_bandwidth: float | None, links: Links | None) -> "ServerLink | None":
        """The link of `server_bandwidth` Mbit/s (None: none); refused where one transfer alone on it would
        outlast `network.MAX_TRANSFER_SECONDS`."""
        if server_bandwidth is None or links is None:
            return None
        link = cls(server_bandwidth * MEGABIT)
        if not links.model_bits / link.capacity <= MAX_TRANSFER_SECONDS:
            raise InputError(
                f"config: with server_bandwidth = {server_bandwidth!r} Mbit/s one transfer of the "
                f"{links.model_bits // 8}-byte model would take {links.model_bits / link.capacity:.3g} virtual s "
                f"(at most {MAX_TRANSFER_SECONDS:g}); raise server_bandwidth"
            )
        return link

    def book_transfers(
        self, bookings: LinkBookings, links: Links, client: int, now: float, compute: float
    ) -> tuple[float, float]:
        """The seconds of the download and the upload of a dispatch made at `now` whose client computes
        for `compute` seconds between them, both booked on the link."""
        bookings.forget_before(now)
        downloaded = bookings.book(self.capacity, now, links.model_bits, float(links.down[client]))
        ready = downloaded + compute
        uploaded = bookings.book(self.capacity, ready, links.model_bits, float(links.up[client]))
        return downloaded - now, uploaded - ready

    def fastest(self, links: Links, client: int) -> tuple[float, float]:
        """The least seconds the client's download and upload can take: alone on the server's link."""
        bits = links.model_bits
        return bits / min(float(links.down[client]), self.capacity), bits / min(float(links.up[client]), self.capacity)
