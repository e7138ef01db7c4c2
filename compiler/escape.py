"""Escaping for every language kiln writes text from outside into.

A model (tensor names, custom op names, its description), a file name and a board file
are input an attacker may write. Whatever lands from them in generated C, a Makefile, a
CMakeLists.txt, a linker script, a shell line, a README or on the user's terminal goes
through exactly one function of this module first; each states what its result is
guaranteed to be, so a reviewer checks a call site against one sentence, not against the
grammar of the target language. For ordinary text (printable ASCII names and
descriptions, the usual case) the functions return their input unchanged, so generated
files do not change for ordinary models.

Characters a function cannot keep are shown as Python-style escapes: `\\xNN` (a code point
below 0x100, or a byte of a non-UTF-8 file name, which Python decodes to a lone surrogate),
`\\uNNNN` or `\\UNNNNNNNN`. An escape always starts with a backslash followed by a letter,
so the output never ends with a backslash and no backslash ever precedes a newline.
Functions that refuse instead of escaping (a word that becomes code must be plain) raise
ValueError naming the word; the caller turns that into the KilnError of its domain.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Callable, Iterable

__all__ = [
    "printable", "terminal", "c_comment", "c_string", "c_identifier", "make_comment",
    "cmake_comment", "ld_comment", "project_name", "plain_words", "make_recipe_word",
    "shell_word", "markdown_text", "markdown_code",
]


def _code_point_escape(ch: str) -> str:
    cp = ord(ch)
    if 0xDC80 <= cp <= 0xDCFF:          # a byte of a non-UTF-8 name (surrogateescape)
        return f"\\x{cp - 0xDC00:02x}"
    if cp < 0x100:
        return f"\\x{cp:02x}"
    if cp < 0x10000:
        return f"\\u{cp:04x}"
    return f"\\U{cp:08x}"


def _escape(text: object, keep: Callable[[str], bool]) -> str:
    """Each character of str(text) that `keep` accepts, the others as escapes."""
    return "".join(ch if keep(ch) else _code_point_escape(ch) for ch in str(text))


def _printable_ascii(ch: str) -> bool:
    return " " <= ch <= "~" and ch != "\\"


def printable(text: object) -> str:
    """One line of printable ASCII (0x20-0x7E): every other character, and the backslash
    itself, as an escape (so a literal backslash and an escaped newline stay distinct).

    The base of the file-format escapers below, and what a name printed by firmware
    (KILN_MODEL_NAME on the serial line) must be: it can hold no newline to forge a record.
    """
    return _escape(text, _printable_ascii)


def terminal(text: object) -> str:
    """Text safe to print on a terminal as (part of) one line.

    Keeps printable characters (non-ASCII letters included); escapes every control
    character - newline, carriage return, ESC (0x1B, ANSI sequences), CSI (0x9B),
    backspace, DEL, the C1 range - and every other non-printable code point (Unicode line
    and paragraph separators, bidirectional overrides, zero-width characters, lone
    surrogates). A byte of a non-UTF-8 file name shows as \\xNN, so printing the result
    never raises UnicodeEncodeError on a UTF-8 stream. Backslashes are kept: error lines
    quote paths.
    """
    return _escape(text, lambda ch: ch.isprintable() and not 0xD800 <= ord(ch) <= 0xDFFF)


# --- C and linker scripts --------------------------------------------------------------

# Pairs a comment must not hold: "*/" would end it, "/*" nests (gcc -Wcomment, an error
# under -Werror), "??" may start a trigraph (-std=c99 reads "??/" as a backslash).
_COMMENT_PAIRS = re.compile(r"\*(?=/)|/(?=\*)|\?(?=\?)")


def c_comment(text: object) -> str:
    """Text for inside a C block comment, on one line.

    Guarantee: printable ASCII only (no newline or other control character, non-ASCII
    escaped); no backslash except as the start of an escape, so never one at the end of
    a line (no line splice); never the pairs `*/`, `/*` or `??` (a space is put between
    the two characters), so the comment cannot end, nest, or hold a trigraph; never a
    leading `/` or a trailing `*` (a space is added), so no pair forms with the comment's
    own ` *` or `*/` either, whatever the caller puts around it.
    """
    text = _COMMENT_PAIRS.sub(lambda m: m.group() + " ", printable(text))
    if text.startswith("/"):
        text = " " + text
    if text.endswith("*"):
        text += " "
    return text


def ld_comment(text: object) -> str:
    """Text for inside a GNU ld linker-script comment: ld's comments are C block
    comments, so this is c_comment's guarantee."""
    return c_comment(text)


_C_STRING_SAFE = re.compile(r"[ !#-\[\]-~]")     # printable ASCII but '"' and '\'


def c_string(text: object) -> str:
    """A complete C string literal (with its quotes) whose value is the UTF-8 bytes of
    `text` (a byte of a non-UTF-8 file name: that byte).

    Guarantee: printable ASCII only; `"` and `\\` escaped; every other byte as a
    three-digit octal escape (octal, not hex: a hex escape would swallow a following
    hex digit); a `?` after a `?` as `\\?`, so no trigraph can form.
    """
    out = []
    previous = ""
    for byte in str(text).encode("utf-8", "surrogateescape"):
        ch = chr(byte)
        if ch == "?" and previous == "?":
            out.append("\\?")
        elif ch in '"\\':
            out.append("\\" + ch)
        elif _C_STRING_SAFE.fullmatch(ch):
            out.append(ch)
        else:
            out.append(f"\\{byte:03o}")
        previous = ch
    return '"' + "".join(out) + '"'


# C99/C11/C23 keywords and the macros of their standard headers that read like keywords.
_C_RESERVED = frozenset("""
    auto break case char const continue default do double else enum extern float for goto
    if inline int long register restrict return short signed sizeof static struct switch
    typedef union unsigned void volatile while alignas alignof bool constexpr false nullptr
    static_assert thread_local true typeof typeof_unqual complex imaginary noreturn
    asm fortran main errno assert offsetof NULL EOF
""".split())

_NOT_IDENTIFIER_CHAR = re.compile(r"[^A-Za-z0-9_]")
C_IDENTIFIER_MAX = 63      # C99 5.2.4.1: significant initial characters of an identifier


def c_identifier(text: object, fallback: str = "x") -> str:
    """A C identifier made from arbitrary text (also a valid Make, CMake and shell word).

    Guarantee: matches [A-Za-z][A-Za-z0-9_]* (so never empty, never a leading digit,
    never the reserved `_X` or `__` prefixes), at most 63 characters, and not a C keyword
    or a name the standard library reserves (`main`, `errno`, `NULL`, ...). Characters
    outside [A-Za-z0-9_] become `_`; leading underscores are dropped; `fallback` (itself
    an identifier) stands in for empty text and is prefixed to text starting with a digit;
    a reserved word gets a trailing `_`. Different texts may map to the same identifier:
    a caller that needs uniqueness adds something unique (Tensor.c_name: the tensor id).
    """
    if not re.fullmatch(r"[A-Za-z][A-Za-z0-9_]*", fallback):
        raise ValueError(f"fallback {fallback!r} is not an identifier")
    name = _NOT_IDENTIFIER_CHAR.sub("_", str(text)).lstrip("_")
    if not name:
        name = fallback
    elif name[0].isdigit():
        name = f"{fallback}_{name}"
    name = name[:C_IDENTIFIER_MAX]
    if name in _C_RESERVED or name.lower() in _C_RESERVED:
        name = name[:C_IDENTIFIER_MAX - 1] + "_"
    return name


# --- build files and shells ------------------------------------------------------------

def project_name(text: object) -> str:
    """A name for build files (CMake's project(), Make targets): c_identifier of the text,
    `model` for empty text. The only form of a model or file name that build files may
    use as code; comments may quote the text itself through make_comment/cmake_comment."""
    return c_identifier(text, fallback="model")


def make_comment(text: object) -> str:
    """Text for the rest of a Makefile `#` comment line.

    Guarantee: printable's (one line of printable ASCII), so no newline ends the comment
    early and no backslash continues it onto the next line. `$` and `#` need no escape
    in a comment (make expands nothing there)."""
    return printable(text)


def cmake_comment(text: object) -> str:
    """Text for the rest of a CMake `# ` line comment (the `#` followed by a space, so it
    is never a bracket comment `#[[`).

    Guarantee: printable's (one line of printable ASCII): nothing can end the comment,
    since a CMake line comment ends only at a newline."""
    return printable(text)


# A word that is the same token to sh, make (assignments and recipes) and CMake (an
# unquoted argument): shlex's safe characters, which hold none of $ # ; " ' ( ) { } \
# whitespace or control characters.
_PLAIN_WORD = re.compile(r"[A-Za-z0-9_@%+=:,./-]+")


def plain_words(words: Iterable[object]) -> str:
    """Words that become build-file code (compiler flags, QEMU options), joined by spaces.

    Guarantee: every word matches [A-Za-z0-9_@%+=:,./-]+, so it is one literal token to
    the shell, to make (in an assignment and in a recipe) and to CMake. There is no
    escaping that is right in all three, so a word outside that set raises ValueError
    (naming it) rather than being rewritten.
    """
    out = []
    for word in words:
        word = str(word)
        if not _PLAIN_WORD.fullmatch(word):
            raise ValueError(f"{printable(word)!r} is not a plain word "
                             f"(letters, digits and _@%+=:,./- only)")
        out.append(word)
    return " ".join(out)


def make_recipe_word(text: object) -> str:
    """One shell word inside a Makefile recipe line, whose value is printable(text).

    Guarantee: printable's (one line, so make cannot read a second recipe line or rule
    out of it), shell-quoted (shlex.quote), and every `$` doubled so make passes it to
    the shell as is; inside the shell's single quotes nothing else is special. Plain
    words (a board name) come out unchanged."""
    return shlex.quote(printable(text)).replace("$", "$$")


def shell_word(text: object) -> str:
    """One argument on a POSIX shell command line (shlex.quote of the text).

    Guarantee: sh reads it back as one word with exactly the value of `text`. Not for a
    Makefile recipe (make would expand `$` and split lines first): use make_recipe_word.
    """
    return shlex.quote(str(text))


_MARKDOWN_SPECIAL = re.compile(r"[`\[\]<>|*]")


def markdown_text(text: object) -> str:
    """Text inside a Markdown line (a heading, a paragraph, a table cell).

    Guarantee: printable's (one line of printable ASCII, so it cannot start a block of
    its own), and the characters that make links, images, inline HTML, code spans,
    emphasis and table cells (` [ ] < > | *) backslash-escaped, so it renders as the
    text itself."""
    return _MARKDOWN_SPECIAL.sub(lambda m: "\\" + m.group(), printable(text))


def markdown_code(text: object) -> str:
    """Text inside a Markdown code span (between backticks), where backslash escapes do
    not work. Guarantee: printable's, and a backtick as \x60, so the span cannot end."""
    return printable(text).replace("`", "\\x60")
