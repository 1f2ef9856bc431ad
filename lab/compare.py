"""Is PD output the colocated output? Compared token by token under greedy decoding, fairly.

Greedy decoding is deterministic per engine, but two engines may differ in the last bits of a
logit (KV computed by another engine, other batch shapes). Where the colocated top-1 token beats
the runner-up by a clear margin (in log-probability), such noise cannot flip it: PD must produce
the same token, and a different one is a real defect. Where the two are nearly tied, either token
is a correct greedy answer; if the outputs split there, the rest of the two sequences continue
from different text and cannot be compared any more.

So each sequence is walked until its first difference:
- same token, clear margin   → a compared position (the evidence);
- same token, near tie       → a near-tie position (agrees, but proves little);
- different token, near tie  → the sequences part at a near tie: fine, stop;
- different token, clear     → a mismatch: the check fails.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

DEFAULT_CLEAR_MARGIN = 0.5  # nats between the top-1 and top-2 log-probabilities
TOKEN_ID_PREFIX = "token_id:"  # vLLM's form with return_tokens_as_token_ids

Outcome = Literal["identical", "parted_at_near_tie", "mismatch", "length_differs"]


@dataclass(frozen=True)
class GreedyStep:
    token: int
    margin: float  # top-1 minus top-2 log-probability at this position (nats, ≥ 0)


@dataclass(frozen=True)
class SequenceComparison:
    outcome: Outcome
    clear_positions: int  # same token where the reference won by a clear margin
    near_tie_positions: int  # positions walked whose margin was below the clear margin
    first_difference: int | None
    uncompared_positions: int  # reference positions after the first difference

    @property
    def failed(self) -> bool:
        return self.outcome == "mismatch"


def parse_token_id(token: str) -> int:
    if not token.startswith(TOKEN_ID_PREFIX):
        raise ValueError(f"expected a {TOKEN_ID_PREFIX}<n> token (return_tokens_as_token_ids), got {token!r}")
    return int(token[len(TOKEN_ID_PREFIX):])


def steps_from_logprobs(logprobs: Mapping) -> list[GreedyStep]:
    """GreedySteps from an OpenAI completions `logprobs` object (top_logprobs ≥ 2, token ids)."""
    steps = []
    for token, top in zip(logprobs["tokens"], logprobs["top_logprobs"], strict=False):
        ranked = sorted(top.values(), reverse=True)
        margin = ranked[0] - ranked[1] if len(ranked) > 1 else float("inf")
        steps.append(GreedyStep(token=parse_token_id(token), margin=margin))
    return steps


def compare_greedy(reference: Sequence[GreedyStep], candidate: Sequence[int], *,
                   clear_margin: float = DEFAULT_CLEAR_MARGIN) -> SequenceComparison:
    """Walk `candidate` (PD) against `reference` (colocated, with margins) to the first difference."""
    clear = near = 0
    for position, step in enumerate(reference):
        is_clear = step.margin >= clear_margin
        if position >= len(candidate):
            return SequenceComparison("length_differs", clear, near, position, len(reference) - position)
        if candidate[position] == step.token:
            clear += is_clear
            near += not is_clear
            continue
        rest = len(reference) - position - 1
        if is_clear:
            return SequenceComparison("mismatch", clear, near, position, rest)
        return SequenceComparison("parted_at_near_tie", clear, near + 1, position, rest)
    if len(candidate) != len(reference):
        return SequenceComparison("length_differs", clear, near, len(reference), 0)
    return SequenceComparison("identical", clear, near, None, 0)


def summarize_comparisons(comparisons: Iterable[SequenceComparison], *, clear_margin: float,
                          min_clear_positions: int) -> dict:
    """Totals over all prompts, and the verdict: no clear mismatch, enough clear positions compared."""
    comparisons = list(comparisons)
    outcomes: dict[str, int] = {}
    for c in comparisons:
        outcomes[c.outcome] = outcomes.get(c.outcome, 0) + 1
    clear = sum(c.clear_positions for c in comparisons)
    mismatches = [i for i, c in enumerate(comparisons) if c.failed]
    return {
        "sequences": len(comparisons),
        "outcomes": outcomes,
        "clear_margin_nats": clear_margin,
        "clear_positions_compared": clear,
        "near_tie_positions": sum(c.near_tie_positions for c in comparisons),
        "positions_not_compared_after_parting": sum(c.uncompared_positions for c in comparisons),
        "mismatch_sequences": mismatches,
        "min_clear_positions": min_clear_positions,
        "passed": not mismatches and outcomes.get("length_differs", 0) == 0 and clear >= min_clear_positions,
    }
