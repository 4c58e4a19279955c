"""The MIXED planner (SPEC §4), the same function as actors/mixed_planner.cpp.

`weight_put` of a revision whose policy is MIXED writes each file straight to
the tier this plan gives it, exactly as `weightctl import` does, so the two
clients put the same bytes in the same places. The rule: sort units by bytes
descending (ties by id), seed the HOT set with the largest, add each later
unit that brings hot bytes strictly closer to total × ratio, keep at least one
unit in each tier, then up to 8 passes of the single best add / remove / swap
(smallest distance; ties by kind, removed id, added id) while one improves.
"""

from __future__ import annotations

from typing import List, Optional, Sequence, Set, Tuple

from .errors import InvalidArgument, PolicyUnsatisfiable

_ADD, _REMOVE, _SWAP = 0, 1, 2  # the declaration order is the tie-break order


def plan_mixed(units: Sequence[Tuple[str, int]], ratio: float) -> Set[str]:
    """The ids of the (id, bytes) units to keep HOT so hot bytes come closest to total × ratio.

    Raises InvalidArgument for a ratio outside (0, 1) or a repeated id, and
    PolicyUnsatisfiable for fewer than 2 units.
    """
    if not 0 < ratio < 1:  # NaN fails too
        raise InvalidArgument.local(f"mixed_hot_ratio must be within (0, 1) but is {ratio!r}")
    if len(units) < 2:
        raise PolicyUnsatisfiable.local(
            f"policy MIXED needs at least 2 affinity units but there "
            f"{'is 1' if len(units) == 1 else 'are 0'}; choose HOT or COLD")
    key = lambda unit_id: unit_id.encode("utf-8")  # std::string compares bytes
    ordered = sorted(units, key=lambda u: (-u[1], key(u[0])))
    by_id = sorted(range(len(ordered)), key=lambda i: key(ordered[i][0]))
    for a, b in zip(by_id, by_id[1:]):
        if ordered[a][0] == ordered[b][0]:
            raise InvalidArgument.local(f'affinity unit id "{ordered[a][0]}" appears more than once')
    size = [u[1] for u in ordered]
    total = sum(size)
    target = float(total) * ratio
    distance = lambda hot_bytes: abs(float(hot_bytes) - target)

    hot = [False] * len(ordered)
    hot[0], hot_bytes = True, size[0]
    for i in range(1, len(ordered)):  # greedy, largest first
        if distance(hot_bytes + size[i]) < distance(hot_bytes):
            hot[i], hot_bytes = True, hot_bytes + size[i]
    if all(hot):  # one smallest unit (smallest id among equals) goes COLD
        victim = len(ordered) - 1
        while victim > 0 and size[victim - 1] == size[victim]:
            victim -= 1
        hot[victim], hot_bytes = False, hot_bytes - size[victim]

    for _ in range(8):  # improvement passes
        hot_ids = [i for i in by_id if hot[i]]
        cold_ids = [i for i in by_id if not hot[i]]
        best: Optional[Tuple[int, int, int, int]] = None  # kind, removed, added, hot_after
        best_distance = distance(hot_bytes)

        def consider(move: Tuple[int, int, int, int]) -> None:
            nonlocal best, best_distance
            if distance(move[3]) < best_distance:  # strictly closer: the first of equals wins
                best, best_distance = move, distance(move[3])

        if len(cold_ids) >= 2:
            for a in cold_ids:
                consider((_ADD, 0, a, hot_bytes + size[a]))
        if len(hot_ids) >= 2:
            for r in hot_ids:
                consider((_REMOVE, r, 0, hot_bytes - size[r]))
        for r in hot_ids:
            for a in cold_ids:
                consider((_SWAP, r, a, hot_bytes - size[r] + size[a]))
        if best is None:
            break
        kind, removed, added, hot_bytes = best
        if kind != _ADD:
            hot[removed] = False
        if kind != _REMOVE:
            hot[added] = True
    return {ordered[i][0] for i in range(len(ordered)) if hot[i]}


__all__: List[str] = ["plan_mixed"]
