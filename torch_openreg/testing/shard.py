"""``--shard I/N``: the I-th of N deterministic, disjoint slices of a list (I counts from 1)."""


def parse(text):
    """``"I/N"`` -> ``(I, N)``, validated."""
    index, _, count = text.partition("/")
    index, count = int(index), int(count)
    if not 1 <= index <= count:
        raise ValueError(f"--shard {text}: expected I/N with 1 <= I <= N")
    return index, count


def select(items, shard):
    """Every N-th item starting at the I-th: shards interleave, so each gets a mix of slow and fast ones."""
    if shard is None:
        return list(items)
    index, count = shard
    return list(items)[index - 1 :: count]
