"""Prompts of each kind the playground is demonstrated on (code, rewrite, chat)."""

PROMPTS = {
    "code-prime": "Write a Python function is_prime(n) that returns True if n is a prime number.",
    "code-edit": (
        "Rename the variable `total` to `subtotal` in this function and return the result:\n"
        "def price(items):\n    total = 0\n    for item in items:\n        total += item.cost\n"
        "    return total"
    ),
    "rewrite-formal": (
        "Rewrite in formal English: hey, the meeting got moved to thursday because the room was "
        "double booked, so bring your slides thursday instead."
    ),
    "rewrite-summary": (
        "Summarize in one sentence: The library closes at 8 pm on weekdays and at 5 pm on weekends. "
        "It is closed on public holidays. Members can borrow up to ten books at a time."
    ),
    "chat-capital": "What is the capital of France, and what is it famous for?",
    "chat-advice": "Give me three tips for sleeping better.",
}
