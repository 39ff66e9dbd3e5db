"""ex-14v-1, wrong: copies what followed the first earlier occurrence of the tail, not the most recent one."""
EXERCISE = "ex-14v-1"
HINT = r"first earlier occurrence"


def lookup_proposal(tokens, k):
    tokens = list(tokens)
    for n in (3, 2, 1):
        tail = tokens[-n:]
        for i in range(len(tokens) - n):
            if tokens[i:i + n] == tail:
                return tokens[i + n:i + n + k]
    return []
