"""Units shared by every layer."""

GIB = 1024 ** 3


def gib_text(n: int | float | None) -> str:
    """Bytes as GiB with two decimals; '-' for unknown."""
    return "-" if n is None else f"{n / GIB:.2f}"
