"""Chat prompts for the real model (SmolLM2-135M-Instruct): the benchmark's tasks and a draft's training set.

Four *families* of prompts, each prompt a list of chat messages that the model's own chat
template renders:

``"code_edit"``  (grounded)
    Edit a given function from Python's standard library (add type hints, add a docstring,
    rename a variable, comment its steps): the answer copies most of the input.
``"summary"``  (grounded)
    Summarise a given passage of Python's documentation (its help topics,
    :data:`pydoc_data.topics.topics`, or a function's docstring), quoting it.
``"quote"``  (grounded)
    Answer a question about a given passage by quoting it.
``"open"``
    Chat questions with no source text, everyday and technical.

Grounded prompts hand the model text that its answer repeats, which is what prompt lookup
exploits; open prompts do not, which is where a trained draft must earn its keep.

There are two disjoint sets.  The *evaluation* set (:data:`EVALUATION`: five hand-picked
prompts per family, short enough that the prompt and 192 new tokens fit well within the
model's 2,048 positions) is what the benchmark measures.  The *training* set (about two
thousand prompts, built from templates and from what Python ships, with a seeded generator)
is what a draft model is trained on, from the target's own answers.  No source text (a
function, a documentation section, a docstring) and no prompt appears in both.

The texts come from the running Python's standard library, which differs a little between
Python versions, so :func:`build_tasks` is run once by ``tools/smollm_tasks.py``, which stores
the result in ``speclib/data/smollm_tasks.json``; :func:`load_tasks` reads that file, so every
Python gets the same prompts.

Examples
--------
>>> tasks = load_tasks()
>>> [len(evaluation_prompts(tasks, family)) for family in FAMILIES]
[5, 5, 5, 5]
>>> evaluation_prompts(tasks, "quote")[0]["messages"][0]["role"]
'user'
"""

from __future__ import annotations

import ast
import builtins
import json
import keyword
import sys
import textwrap
from pathlib import Path

import numpy as np

from .._validate import as_generator, as_int
from .corpora import CODE_FILES, documents, stdlib_directory

#: The four families, the three grounded ones first.
FAMILIES = ("code_edit", "summary", "quote", "open")
#: The families whose prompt contains the text the answer repeats.
GROUNDED = ("code_edit", "summary", "quote")
#: Where ``tools/smollm_tasks.py`` stores the task set.
TASKS_PATH = Path(__file__).resolve().parents[1] / "data" / "smollm_tasks.json"
#: Version of the stored layout.
FORMAT = 1
#: The longest source text (characters) a prompt carries: about 600 to 800 of the model's
#: tokens, so that the rendered prompt and 192 new tokens stay well within 2,048 positions.
MAX_SOURCE_CHARS = 2400
#: The shortest source text worth a grounded prompt.
MIN_SOURCE_CHARS = 250
#: The longest a whole prompt (all messages' contents) may be, in characters.
MAX_PROMPT_CHARS = 3200
#: A line at least this long (stripped) that a training text shares with an evaluation text
#: makes the training text too close to keep (a near-copy of a function, a section repeated
#: inside another).
SHARED_LINE_CHARS = 40

# --- the instructions ------------------------------------------------------------------------

_CODE_INSTRUCTIONS = {
    "type-hints": "Add type hints to the parameters and the return value of this Python function. "
                  "Reply with the complete function in one code block.",
    "docstring": "Add a docstring to this Python function that explains its parameters and what it "
                 "returns. Reply with the complete function in one code block.",
    "rename": "Rename the variable `{old}` to `{new}` everywhere in this Python function. "
              "Reply with the complete function in one code block.",
    "comments": "Add a short comment before each step of this Python function that says what the "
                "step does. Reply with the complete function in one code block.",
}
_SUMMARY_INSTRUCTIONS = (
    "Summarise the text below in three to five sentences. Quote its key phrases word for word, "
    "in double quotes.",
    "Write a short summary of this passage from Python's documentation for a beginner, and quote "
    "its most important sentence exactly.",
    "Summarize the following documentation in a few sentences, including at least two exact "
    "quotes from it.",
)
_QUOTE_INSTRUCTION = ("Answer the question using only the text below. Quote the sentences that "
                      "answer it word for word.")
#: Descriptive names for a renamed short variable; others become ``<name>_value``.
_RENAMES = {"i": "index", "j": "inner_index", "k": "key", "n": "count", "s": "text", "x": "value",
            "c": "char", "d": "mapping", "l": "items", "m": "match", "p": "path", "r": "result",
            "v": "value", "t": "item", "res": "result", "buf": "buffer", "idx": "index",
            "pos": "position", "ch": "char", "val": "value", "tmp": "temporary", "msg": "message"}

# --- the evaluation set, chosen by hand --------------------------------------------------------

#: Code edits: (file, function, instruction, rename pair or None).
_EVAL_CODE = (
    ("colorsys.py", "rgb_to_hsv", "type-hints", None),
    ("heapq.py", "_siftup", "docstring", None),
    ("statistics.py", "median", "rename", ("n", "count")),
    ("textwrap.py", "indent", "type-hints", None),
    ("glob.py", "escape", "docstring", None),
)
#: Summaries: the title of a help-topic section.
_EVAL_SUMMARY = ('The "assert" statement', "Truth Value Testing", 'The "del" statement',
                 "Boolean operations", "Lambdas")
#: Answers by quoting: (section title, question).
_EVAL_QUOTE = (
    ('The "return" statement',
     'What happens when "return" passes control out of a "try" statement with a "finally" clause?'),
    ('The "while" statement', 'What does a "break" statement executed in the first suite of a "while" '
                              'loop do?'),
    ("Integer literals", "Why are leading zeros not allowed in a non-zero decimal number?"),
    ("Dictionaries", "What happens to the order of a dictionary's keys when a key is removed and "
                     "inserted again?"),
    ('The "global" statement', 'Which kinds of names must not be listed in a "global" statement?'),
)
#: Open questions, written for this set (the training templates never produce them).
_EVAL_OPEN = (
    "What are some good ways to stay focused while working from home?",
    "Explain the difference between a list and a tuple in Python, with a short example of each.",
    "How does a refrigerator keep food cold?",
    "Write a short, friendly email asking a colleague to move our meeting to Thursday afternoon.",
    "I have chicken, rice and spinach. What could I cook for dinner tonight, and how?",
)

# --- the training templates for open questions ------------------------------------------------

_CONCEPTS = (
    "photosynthesis", "compound interest", "recursion", "a hash table", "inflation", "gravity",
    "the water cycle", "machine learning", "a binary search", "supply and demand", "DNA",
    "a black hole", "climate change", "an operating system", "the immune system", "encryption",
    "a neural network", "evolution by natural selection", "a database index", "the stock market",
    "a vaccine", "renewable energy", "the internet", "a compiler", "plate tectonics",
    "the greenhouse effect", "a credit score", "version control", "cloud computing", "a mortgage",
    "the scientific method", "probability", "a linked list", "an API", "electricity",
    "the speed of light", "a budget", "caching", "a virus in computing", "democracy",
    "an algorithm", "a sorting algorithm", "big O notation", "a function in programming",
    "object-oriented programming", "a regular expression", "unit testing", "a web browser",
    "the Pythagorean theorem", "an atom", "a calorie", "sleep cycles", "a recession",
    "open-source software", "a spreadsheet", "a password manager", "a garbage collector",
    "a stack and a queue", "statistics", "a prime number",
)
_EXPLAIN = ("Explain {x} in simple terms.", "What is {x}, and why does it matter?",
            "Can you give me a short introduction to {x}?")
_PAIRS = (
    ("weather", "climate"), ("a virus", "a bacterium"), ("RAM", "storage"), ("a loan", "a lease"),
    ("speed", "velocity"), ("HTTP", "HTTPS"), ("a compiler", "an interpreter"),
    ("a process", "a thread"), ("baking soda", "baking powder"), ("an alligator", "a crocodile"),
    ("a dictionary", "a set in Python"), ("Git", "GitHub"), ("a CPU", "a GPU"),
    ("debit cards", "credit cards"), ("a simile", "a metaphor"), ("mean", "median"),
    ("a hurricane", "a tornado"), ("stocks", "bonds"), ("latency", "bandwidth"),
    ("a library", "a framework"), ("TCP", "UDP"), ("an asteroid", "a comet"),
    ("SQL", "NoSQL databases"), ("affect", "effect"), ("a class", "an object"),
    ("frontend", "backend development"), ("a router", "a modem"), ("a while loop", "a for loop"),
    ("an integer", "a floating-point number"), ("a bug", "a feature request"),
    ("a lake", "a pond"), ("jam", "jelly"), ("a resume", "a cover letter"),
    ("empathy", "sympathy"), ("a planet", "a star"), ("a function", "a method in Python"),
    ("copying", "deep copying in Python"), ("an emulator", "a virtual machine"),
    ("a tax deduction", "a tax credit"), ("a sprint", "a marathon in training"),
)
_ACTIVITIES = (
    "learning a new language", "saving money each month", "sleeping better", "running a first 5k",
    "writing clean code", "preparing for a job interview", "keeping houseplants alive",
    "studying for exams", "cooking on a budget", "reducing screen time", "giving a presentation",
    "organising a small kitchen", "learning to play the guitar", "making friends in a new city",
    "travelling with a small backpack", "reviewing someone's code", "writing a good email",
    "staying healthy in winter", "learning Python", "taking better photos with a phone",
    "reading more books", "managing a small team", "starting a vegetable garden",
    "debugging a program", "staying calm under pressure", "training a puppy",
    "writing a short story", "planning a birthday party", "cycling to work", "moving house",
    "negotiating a salary", "keeping a journal", "learning to swim as an adult",
    "decluttering a wardrobe", "preparing a family picnic", "writing documentation",
    "staying motivated at the gym", "speaking up in meetings", "packing for a long flight",
    "choosing a first laptop",
)
_TIPS = ("Give me {n} tips for {x}.", "What are the most common mistakes people make when {x}, "
                                      "and how can I avoid them?")
_FORMS = ("a short poem", "a haiku", "a short story of about 100 words", "a product description",
          "a limerick")
_SUBJECTS = (
    "the ocean at night", "a lost umbrella", "autumn leaves", "a robot learning to cook",
    "a busy train station", "a cup of coffee", "the first day of school", "a lighthouse keeper",
    "a cat who loves boxes", "a thunderstorm", "a forgotten library book", "the moon",
    "a mountain village", "a pair of running shoes", "an old bicycle", "a snowy morning",
    "a garden in spring", "a friendly dragon", "the last train home", "a reusable water bottle",
    "a desert sunset", "a treehouse", "a paper boat", "a violin", "a noisy neighbour",
    "a city in the rain", "a sunflower", "a kite", "a quiet museum", "a rainy Sunday",
)
_PYTHON_TASKS = (
    "read a CSV file", "reverse a string", "remove duplicates from a list while keeping the order",
    "sort a list of dictionaries by a key", "count the words in a text file",
    "merge two dictionaries", "check whether a file exists", "measure how long a function takes",
    "read a JSON file", "write a list of lines to a file", "find the largest value in a list",
    "flatten a list of lists", "convert a string to a date", "generate a random password",
    "download nothing but list the files in a folder", "split a string on commas",
    "handle an exception when dividing by zero", "format a number with two decimals",
    "get the current date and time", "make a simple command-line argument parser",
    "iterate over two lists at the same time", "create a class with a constructor",
    "check whether a string is a palindrome", "compute the factorial of a number",
    "find all the even numbers in a list", "use a list comprehension", "sort a dictionary by value",
    "read user input and convert it to an integer", "write a unit test for a function",
    "compute the average of a list of numbers", "replace every vowel in a string",
    "make a copy of a nested list", "group words by their first letter",
    "count how often each item occurs in a list", "read a file line by line",
    "join a list of strings with spaces", "round a float to the nearest integer",
    "define a function with default arguments", "use a generator to produce squares",
    "find the index of an item in a list", "check the type of a variable",
    "remove whitespace from the ends of a string", "convert a list to a set",
    "write a recursive function for the Fibonacci numbers", "use enumerate in a loop",
    "swap two variables", "create a dictionary from two lists", "pause a program for one second",
    "compare two files line by line", "print a table of numbers neatly",
)
_PYTHON_HOWTO = ("How do I {x} in Python?", "Show me how to {x} in Python, with a short example.")
_THINGS = (
    "a bicycle gear", "a microwave oven", "a solar panel", "GPS", "a credit card payment",
    "a search engine", "a touchscreen", "an electric car battery", "a vaccine", "wifi",
    "a thermostat", "a camera lens", "noise-cancelling headphones", "a 3D printer",
    "a QR code", "an airplane wing", "a heat pump", "email", "a barcode scanner",
    "a hydroelectric dam", "a compass", "a smoke detector", "a washing machine", "a password hash",
    "public-key encryption", "an elevator", "a lock and key", "a rainbow", "a sailboat",
    "a pressure cooker", "a streaming service", "a spam filter", "an electric guitar",
    "a dishwasher", "a wind turbine", "a hot-air balloon", "a submarine", "a fuel cell",
    "a traffic light", "a recommendation system",
)
_PROS_CONS = (
    "working from an office", "electric cars", "learning to code at a bootcamp",
    "renting instead of buying a home", "remote meetings", "open-plan offices", "static typing",
    "using a spreadsheet as a database", "microservices", "buying a used car", "freelancing",
    "studying abroad", "a four-day work week", "online shopping", "keeping a pet rabbit",
    "writing tests first", "living in a big city", "e-books", "solar panels at home",
    "public transport", "a standing desk", "taking a gap year", "cooking at home",
    "using one big monitor", "dynamic typing", "pair programming", "learning two languages at once",
    "meal planning", "shared documents", "coding interviews",
)
_PLACES = ("Lisbon", "Kyoto", "the Scottish Highlands", "Rome", "Vancouver", "Marrakesh",
           "Iceland", "Barcelona", "New Zealand", "Prague", "Istanbul", "Mexico City",
           "the Norwegian fjords", "Singapore", "Buenos Aires", "Cape Town", "Vienna", "Seoul",
           "Amsterdam", "Sydney")
_PLANS = ("Plan a {n}-day trip to {x} for someone who likes food and walking.",
          "What should a first-time visitor to {x} see in {n} days?")
_NUMBERS = ("two", "three", "four", "five")


# --- reading the standard library --------------------------------------------------------------

def _functions() -> list[tuple[str, str, str]]:
    """``(file, qualified name, source)`` of every function and method in the book's code files,
    in file order then source order, dedented."""
    root = stdlib_directory()
    found = []
    for name in CODE_FILES:
        text = (root / name).read_text(encoding="utf-8")
        for node in ast.parse(text).body:
            members = [(node.name, node)] if isinstance(node, ast.FunctionDef) else []
            if isinstance(node, ast.ClassDef):
                members = [(f"{node.name}.{m.name}", m) for m in node.body if isinstance(m, ast.FunctionDef)]
            for qualname, function in members:
                # The decorator lines belong to the function as a reader sees it.
                start = (function.decorator_list[0] if function.decorator_list else function).lineno
                lines = text.splitlines()[start - 1:function.end_lineno]
                found.append((name, qualname, textwrap.dedent("\n".join(lines))))
    return found


def _without_docstring(source: str) -> str:
    """A function's source without its docstring (for "add a docstring")."""
    tree = ast.parse(source)
    function = tree.body[0]
    if ast.get_docstring(function) is None:
        return source
    doc = function.body[0]
    lines = source.splitlines()
    kept = lines[:doc.lineno - 1] + lines[doc.end_lineno:]
    if len(function.body) == 1:  # a body that was only its docstring
        indent = lines[doc.lineno - 1][:len(lines[doc.lineno - 1]) - len(lines[doc.lineno - 1].lstrip())]
        kept.insert(doc.lineno - 1, indent + "pass")
    return "\n".join(kept)


def _assigned_names(source: str) -> list[str]:
    """The local variables a function assigns (sorted), the candidates for a rename."""
    function = ast.parse(source).body[0]
    names = {node.id for node in ast.walk(function) if isinstance(node, ast.Name)
             and isinstance(node.ctx, ast.Store) and node.id not in ("_", "self", "cls")}
    return sorted(names)


def _has_annotations(source: str) -> bool:
    function = ast.parse(source).body[0]
    arguments = function.args
    every = arguments.posonlyargs + arguments.args + arguments.kwonlyargs
    every += [a for a in (arguments.vararg, arguments.kwarg) if a is not None]
    return function.returns is not None or any(a.annotation is not None for a in every)


def _sections() -> list[tuple[str, str]]:
    """``(id, text)`` of every distinct help-topic section, in the corpus's order; a title shared by
    sections with different texts gets ``#2``, ``#3``."""
    seen, out, titles = set(), [], {}
    for text in documents("prose"):
        if text in seen:
            continue
        seen.add(text)
        title = text.splitlines()[0].strip()
        titles[title] = titles.get(title, 0) + 1
        out.append((title if titles[title] == 1 else f"{title}#{titles[title]}", text))
    return out


def _trim(text: str, limit: int = MAX_SOURCE_CHARS) -> str:
    """``text`` cut at the last paragraph break before ``limit`` characters (whole when it fits)."""
    text = text.strip("\n")
    if len(text) <= limit:
        return text
    cut = text.rfind("\n\n", 0, limit)
    return text[:cut] if cut > 0 else text[:limit]


def _docstrings() -> list[tuple[str, str, str]]:
    """``(id, name, docstring)`` of the book's code files' functions and classes with a docstring of
    at least :data:`MIN_SOURCE_CHARS` characters."""
    root = stdlib_directory()
    out = []
    for name in CODE_FILES:
        module = name[:-3].replace("/__init__", "").replace("/", ".")
        for node in ast.parse((root / name).read_text(encoding="utf-8")).body:
            if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
                doc = ast.get_docstring(node)
                if doc and len(doc) >= MIN_SOURCE_CHARS and not node.name.startswith("_"):
                    out.append((f"{name}:{node.name}#doc", f"{module}.{node.name}", _trim(doc)))
    return out


# --- building prompts ---------------------------------------------------------------------------

def _user(content: str) -> list[dict]:
    return [{"role": "user", "content": content}]


def _code_prompt(file: str, qualname: str, source: str, task: str, rename: tuple | None) -> dict:
    if task == "docstring":
        source = _without_docstring(source)
    instruction = _CODE_INSTRUCTIONS[task]
    if task == "rename":
        instruction = instruction.format(old=rename[0], new=rename[1])
    return {"family": "code_edit", "source": f"{file}:{qualname}", "task": task,
            "messages": _user(f"{instruction}\n\n```python\n{source}\n```")}


def _summary_prompt(source: str, text: str, instruction: str) -> dict:
    return {"family": "summary", "source": source, "task": "summarise",
            "messages": _user(f"{instruction}\n\n{text}")}


def _quote_prompt(source: str, text: str, question: str) -> dict:
    return {"family": "quote", "source": source, "task": "quote",
            "messages": _user(f"{_QUOTE_INSTRUCTION}\n\nText:\n{text}\n\nQuestion: {question}")}


def _open_prompt(question: str, source: str) -> dict:
    return {"family": "open", "source": source, "task": "chat", "messages": _user(question)}


def _evaluation(functions: dict, sections: dict) -> list[dict]:
    out = []
    for file, qualname, task, rename in _EVAL_CODE:
        out.append(_code_prompt(file, qualname, functions[file, qualname], task, rename))
    for title in _EVAL_SUMMARY:
        out.append(_summary_prompt(f"topics:{title}", _trim(sections[title]), _SUMMARY_INSTRUCTIONS[0]))
    for title, question in _EVAL_QUOTE:
        out.append(_quote_prompt(f"topics:{title}", _trim(sections[title]), question))
    for i, question in enumerate(_EVAL_OPEN):
        out.append(_open_prompt(question, f"open:evaluation/{i}"))
    return out


def _subject(title: str) -> str:
    """A section title as the subject of a question: 'The "while" statement' -> 'the "while" statement'."""
    title = title.split("#")[0]
    return "t" + title[1:] if title.startswith("The ") else title


def long_lines(text: str) -> set[str]:
    """The stripped lines of ``text`` with at least :data:`SHARED_LINE_CHARS` characters.

    Examples
    --------
    >>> [len(line) for line in long_lines("short, kept out" + chr(10) + "  " + "x" * 40 + "  ")]
    [40]
    """
    if not isinstance(text, str):
        raise TypeError(f"text: expected a string, got {type(text).__name__}")
    return {line.strip() for line in text.splitlines() if len(line.strip()) >= SHARED_LINE_CHARS}


def _evaluation_lines(functions: dict, sections: dict) -> set[str]:
    texts = [functions[file, name] for file, name, _, _ in _EVAL_CODE]
    texts += [sections[title] for title in _EVAL_SUMMARY + tuple(t for t, _ in _EVAL_QUOTE)]
    return set().union(*map(long_lines, texts))


def _training(functions: dict, sections: dict, rng: np.random.Generator) -> list[dict]:
    held_code = {(file, name) for file, name, _, _ in _EVAL_CODE}
    held_text = set(_EVAL_SUMMARY) | {title for title, _ in _EVAL_QUOTE}
    held_lines = _evaluation_lines(functions, sections)
    out = []
    for (file, qualname), source in functions.items():
        if (file, qualname) in held_code or not MIN_SOURCE_CHARS <= len(source) <= MAX_SOURCE_CHARS \
                or long_lines(source) & held_lines:
            continue
        names = _assigned_names(source)
        tasks = ["docstring", "comments"] + (["type-hints"] if not _has_annotations(source) else []) + \
            (["rename"] if names else [])
        task = tasks[int(rng.integers(len(tasks)))]
        rename = None
        if task == "rename":
            old = names[int(rng.integers(len(names)))]
            rename = (old, _RENAMES.get(old, f"{old}_value"))
            if rename[1] in names:
                rename = (old, f"{old}_renamed")
        out.append(_code_prompt(file, qualname, source, task, rename))
    for title, text in sections.items():
        text = _trim(text)
        if title.split("#")[0] in held_text or len(text) < MIN_SOURCE_CHARS or long_lines(text) & held_lines:
            continue
        instruction = _SUMMARY_INSTRUCTIONS[int(rng.integers(len(_SUMMARY_INSTRUCTIONS)))]
        out.append(_summary_prompt(f"topics:{title}", text, instruction))
        subject = _subject(title)
        question = (f"According to the text, what is {subject}?",
                    f"What rules does the text give for {subject}?",
                    f"What does the text say about {subject}? Quote the most important sentence.")
        out.append(_quote_prompt(f"topics:{title}", text, question[int(rng.integers(3))]))
    for source, name, doc in _docstrings():
        if long_lines(doc) & held_lines:
            continue
        text = f"The documentation of `{name}`:\n\n{doc}"
        if rng.random() < 0.5:
            instruction = _SUMMARY_INSTRUCTIONS[int(rng.integers(len(_SUMMARY_INSTRUCTIONS)))]
            out.append(_summary_prompt(source, text, instruction))
        else:
            question = (f"What does `{name}` return, according to its documentation?",
                        f"Which arguments does `{name}` accept, according to its documentation?",
                        f"What does the documentation say `{name}` does?")
            out.append(_quote_prompt(source, text, question[int(rng.integers(3))]))
    out.extend(_open_training(rng))
    return out


def _open_training(rng: np.random.Generator) -> list[dict]:
    def pick(options):
        return options[int(rng.integers(len(options)))]

    questions = []
    for x in _CONCEPTS:
        questions.append(pick(_EXPLAIN).format(x=x))
    for a, b in _PAIRS:
        questions.append(f"What is the difference between {a} and {b}?")
    for x in _ACTIVITIES:
        questions.append(pick(_TIPS).format(n=pick(_NUMBERS[1:]), x=x))
    for form in _FORMS:
        for x in _SUBJECTS:
            questions.append(f"Write {form} about {x}.")
    for x in _PYTHON_TASKS:
        questions.append(pick(_PYTHON_HOWTO).format(x=x))
    for x in _THINGS:
        questions.append(f"How does {x} work?")
    for x in _PROS_CONS:
        questions.append(f"What are the pros and cons of {x}?")
    for x in _PLACES:
        questions.append(pick(_PLANS).format(n=pick(_NUMBERS), x=x))
    # Questions about Python that name a keyword, a built-in or a module, and give no text.
    for word in keyword.kwlist:
        questions.append(f"What does the Python keyword `{word}` do? Give a small example.")
    # Python's own built-ins only: not what site adds (help, exit) or a running program patched in.
    for name in sorted(n for n, obj in vars(builtins).items() if n.islower() and not n.startswith("_")
                       and callable(obj) and getattr(obj, "__module__", None) == "builtins"):
        questions.append(f"What does Python's built-in `{name}` do, and when would I use it?")
    for name in sorted(n for n in sys.stdlib_module_names if not n.startswith("_")):
        questions.append(f"What is the Python standard library module `{name}` for?")
    return [_open_prompt(question, f"open:training/{i}") for i, question in enumerate(questions)]


def build_tasks(seed: int = 0) -> dict:
    """The task set, built from the running Python's standard library.

    Parameters
    ----------
    seed : int
        Seeds the choices among templates (which edit a function gets, which wording a question).

    Returns
    -------
    dict
        ``{"format", "python", "seed", "families", "evaluation", "training"}``: each prompt is
        ``{"id", "family", "source", "task", "messages"}``, its ``messages`` a list of
        ``{"role", "content"}``.

    Examples
    --------
    >>> tasks = build_tasks()
    >>> len(tasks["evaluation"]), len(tasks["training"]) > 1000
    (20, True)
    """
    seed = as_int(seed, "seed", minimum=0)
    rng = as_generator(seed)
    functions = {(file, name): source for file, name, source in _functions()}
    sections = dict(_sections())
    missing = [f"{file}:{name}" for file, name, _, _ in _EVAL_CODE if (file, name) not in functions]
    missing += [f"topics:{t}" for t in _EVAL_SUMMARY + tuple(t for t, _ in _EVAL_QUOTE) if t not in sections]
    if missing:
        raise RuntimeError(f"this Python's standard library lacks the evaluation sources {', '.join(missing)}")
    evaluation, training = _evaluation(functions, sections), _training(functions, sections, rng)
    for name, prompts in (("evaluation", evaluation), ("training", training)):
        for i, prompt in enumerate(prompts):
            prompt["id"] = f"{name}/{prompt['family']}/{i:04d}"
    order = ("id", "family", "source", "task", "messages")
    return {"format": FORMAT, "python": ".".join(map(str, sys.version_info[:3])), "seed": seed,
            "families": list(FAMILIES), "grounded": list(GROUNDED),
            "evaluation": [{key: p[key] for key in order} for p in evaluation],
            "training": [{key: p[key] for key in order} for p in training]}


# --- reading and checking the stored set ----------------------------------------------------------

def _prompt_text(prompt: dict) -> str:
    return "\n".join(m["content"] for m in prompt["messages"])


def check_tasks(tasks: object) -> dict:
    """Check a task set's layout and promises; return it, or raise ``ValueError`` naming the fault.

    Every prompt has an id (unique), a known family, a source and a non-empty list of
    ``{"role", "content"}`` messages whose text is at most :data:`MAX_PROMPT_CHARS` characters;
    the evaluation set has prompts of every family; no source and no prompt text is in both sets.

    Examples
    --------
    >>> check_tasks({"evaluation": []})
    Traceback (most recent call last):
    ...
    ValueError: tasks: missing 'format', 'families', 'training'
    """
    if not isinstance(tasks, dict):
        raise ValueError(f"tasks: expected a JSON object, got {type(tasks).__name__}")
    missing = [k for k in ("format", "families", "evaluation", "training") if k not in tasks]
    if missing:
        raise ValueError(f"tasks: missing {', '.join(map(repr, missing))}")
    if tasks["format"] != FORMAT:
        raise ValueError(f"tasks['format']: expected {FORMAT}, got {tasks['format']!r}")
    if list(tasks["families"]) != list(FAMILIES):
        raise ValueError(f"tasks['families']: expected {list(FAMILIES)}, got {tasks['families']!r}")
    ids = set()
    for part in ("evaluation", "training"):
        if not isinstance(tasks[part], list) or not tasks[part]:
            raise ValueError(f"tasks[{part!r}]: expected a non-empty list of prompts")
        for i, prompt in enumerate(tasks[part]):
            where = f"tasks[{part!r}][{i}]"
            if not isinstance(prompt, dict) or not all(k in prompt for k in ("id", "family", "source", "messages")):
                raise ValueError(f"{where}: expected an object with 'id', 'family', 'source' and 'messages'")
            if prompt["id"] in ids:
                raise ValueError(f"{where}: id {prompt['id']!r} is used twice")
            ids.add(prompt["id"])
            if prompt["family"] not in FAMILIES:
                raise ValueError(f"{where}: family {prompt['family']!r} is not one of {list(FAMILIES)}")
            messages = prompt["messages"]
            if not isinstance(messages, list) or not messages or not all(
                    isinstance(m, dict) and m.get("role") in ("system", "user", "assistant")
                    and isinstance(m.get("content"), str) and m["content"].strip() for m in messages):
                raise ValueError(f"{where}: messages must be a non-empty list of {{'role', 'content'}} "
                                 "with a known role and a non-empty content")
            if len(_prompt_text(prompt)) > MAX_PROMPT_CHARS:
                raise ValueError(f"{where}: {len(_prompt_text(prompt))} characters, more than {MAX_PROMPT_CHARS}")
    families = {p["family"] for p in tasks["evaluation"]}
    if families != set(FAMILIES):
        raise ValueError(f"tasks['evaluation']: no prompt of {sorted(set(FAMILIES) - families)}")
    for what, key in (("source", lambda p: p["source"]), ("prompt", _prompt_text)):
        shared = {key(p) for p in tasks["evaluation"]} & {key(p) for p in tasks["training"]}
        if shared:
            raise ValueError(f"tasks: {len(shared)} {what}(s) in both the evaluation and the training "
                             f"set, e.g. {sorted(shared)[0][:80]!r}")
    held = set().union(*(long_lines(_given_text(p)) for p in tasks["evaluation"]))
    for i, prompt in enumerate(tasks["training"]):
        shared = long_lines(_given_text(prompt)) & held
        if shared:
            raise ValueError(f"tasks['training'][{i}]: shares the line {sorted(shared)[0]!r} with an "
                             "evaluation prompt's text")
    return tasks


def _given_text(prompt: dict) -> str:
    """What a prompt gives the model to work on: a grounded prompt's text after its instruction
    (the first paragraph), without its question; an open prompt's question."""
    text = _prompt_text(prompt)
    if prompt["family"] == "open":
        return text
    body = text.split("\n\n", 1)[-1]
    return "\n".join(line for line in body.splitlines() if not line.startswith("Question: "))


def load_tasks(path: str | Path | None = None) -> dict:
    """The stored task set (:data:`TASKS_PATH`, or ``path``), checked by :func:`check_tasks`.

    Examples
    --------
    >>> load_tasks()["python"] != ""
    True
    """
    path = Path(TASKS_PATH if path is None else path)
    try:
        tasks = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise FileNotFoundError(f"path: no task set at {path} (write it with tools/smollm_tasks.py)") from None
    except json.JSONDecodeError as error:
        raise ValueError(f"path: {path} is not JSON ({error})") from None
    return check_tasks(tasks)


def _select(tasks: dict, part: str, family: str | None, per_family: int | None) -> list[dict]:
    if not isinstance(tasks, dict) or not isinstance(tasks.get(part), list):
        raise ValueError(f"tasks: expected a task set (load_tasks()), with a list of {part!r} prompts")
    if family is not None and family not in FAMILIES:
        raise ValueError(f"family: expected one of {list(FAMILIES)} or None, got {family!r}")
    if per_family is not None:
        per_family = as_int(per_family, "per_family", minimum=1)
    out, counts = [], {}
    for prompt in tasks[part]:
        if family is not None and prompt["family"] != family:
            continue
        counts[prompt["family"]] = counts.get(prompt["family"], 0) + 1
        if per_family is None or counts[prompt["family"]] <= per_family:
            out.append(prompt)
    return out


def evaluation_prompts(tasks: dict | None = None, family: str | None = None,
                       per_family: int | None = None) -> list[dict]:
    """The evaluation prompts (of one family, or all), the first ``per_family`` of each family.

    Examples
    --------
    >>> [p["family"] for p in evaluation_prompts(per_family=1)]
    ['code_edit', 'summary', 'quote', 'open']
    """
    return _select(load_tasks() if tasks is None else tasks, "evaluation", family, per_family)


def training_prompts(tasks: dict | None = None, family: str | None = None) -> list[dict]:
    """The training prompts (of one family, or all), for generating a draft's training text.

    Examples
    --------
    >>> len(training_prompts(family="open")) > 500
    True
    """
    return _select(load_tasks() if tasks is None else tasks, "training", family, None)
