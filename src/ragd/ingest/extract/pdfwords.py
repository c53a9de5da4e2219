"""A PDF's words as boxes: their font's weight and slant, scripts (raised or lowered text touching a word)
attached to it, right-to-left runs put in logical order, unmapped glyphs told."""

from __future__ import annotations

import re
import unicodedata
from dataclasses import replace
from operator import itemgetter
from typing import Any

from .geometry import Box

TEXT, X0, TOP = itemgetter("text"), itemgetter("x0"), itemgetter("top")
LONE_CID = re.compile(r"(?<!\S)\(cid:\d+\)(?!\S)")  # an unmapped glyph standing alone: a symbol-font bullet


MAX_SCRIPT_SIZE = 0.8  # of the word before it: smaller text touching a word, raised or lowered, is a script
MAX_SCRIPT_GAP = 0.15  # of the word's size: no visible space between a word and its script


def attach_scripts(words: list[Box]) -> list[Box]:
    """Superscripts and subscripts (a footnote mark "Others(1)", "CO2") joined to the word they touch. Set
    above or below the line, they were taken for a line of their own: a table row of stray "(1)"s."""
    ends: dict[int, list[int]] = {}  # whole points of a word's right edge -> the words ending there
    out: list[Box | None] = list(words)
    for i in sorted(range(len(words)), key=lambda i: (words[i].x0, words[i].top)):
        w = words[i]
        near = sorted(j for x in range(int(w.x0) - 2, int(w.x0) + 2) for j in ends.get(x, ()))
        parent = next((j for j in near if (p := out[j]) is not None and _script_of(w, p)), None)
        if parent is not None:
            p = out[parent]
            assert p is not None
            # a raised mark after a word is a footnote's ("Center 1", found by "center"); a bracketed mark or
            # a subscript ("Others(1)", "CO2") is part of the word
            space = " " if w.center < p.center and p.text[-1:].isalpha() and w.text[:1].isalnum() else ""
            out[parent] = replace(p, text=p.text + space + w.text, x1=max(p.x1, w.x1))
            out[i] = None
            i = parent
        end = out[i]
        assert end is not None
        ends.setdefault(int(end.x1), []).append(i)
    return [w for w in out if w is not None]


def _script_of(w: Box, word: Box) -> bool:
    gap = w.x0 - word.x1
    return (w.size <= MAX_SCRIPT_SIZE * word.size and -1.0 <= gap <= MAX_SCRIPT_GAP * word.size
            and word.top - 0.5 * w.height <= w.top and w.bottom <= word.bottom + 0.5 * w.height
            and abs(w.center - word.center) > 0.15 * word.height)


def word_box(word: dict[str, Any]) -> Box:
    font = str(word.get("fontname", "")).split("+", 1)[-1]  # without the subset tag ("ABCDEF+")
    return Box(text=word["text"], x0=word["x0"], top=word["top"], x1=word["x1"], bottom=word["bottom"],
               size=float(word["size"]), bold=is_bold(font), italic=is_italic(font), font=font)


def _rtl(ch: str) -> bool:
    return unicodedata.bidirectional(ch) in ("R", "AL")


def visual_to_logical(text: str) -> str:
    """Right-to-left lines (Arabic, Hebrew, Persian) come out of the text layer in visual order: words
    reversed and read left to right. Put them back in reading order: within each word the right-to-left runs
    are reversed and the runs swap places; then the words swap places. Lines that are mostly left-to-right
    are returned as they are."""
    letters = [ch for ch in text if ch.isalpha()]
    if not letters or sum(1 for ch in letters if _rtl(ch)) * 2 <= len(letters):
        return text
    words = []
    for word in text.split(" "):
        runs: list[str] = []
        for ch in word:
            if runs and _rtl(runs[-1][-1]) == _rtl(ch):
                runs[-1] += ch
            else:
                runs.append(ch)
        words.append("".join(_reverse_rtl(run) if _rtl(run[0]) else run for run in reversed(runs)))
    return " ".join(reversed(words))


_ALEFS = "\u0627\u0623\u0625\u0622"


def _reverse_rtl(run: str) -> str:
    """Reverse a visual right-to-left run. A lam-alef ligature is decoded in logical order inside the visual
    stream, so it is swapped first, except at the run's end, where "lam, alef" is the article al- reversed."""
    chars = list(run)
    i = 0
    while i < len(chars) - 2:
        if chars[i] == "\u0644" and chars[i + 1] in _ALEFS:
            chars[i], chars[i + 1] = chars[i + 1], chars[i]
            i += 2
        else:
            i += 1
    return "".join(reversed(chars))


# "Bd" is Adobe's short style name (MyriadPro-Bd); TeX's bold extended faces are CMBX10, SFBX1000, LMRoman10-Bold;
# URW's Times bold is NimbusRomNo9L-Medi
_BOLD = re.compile(r"bold|black|heavy|demi|bd(?:it|obl)?$|^(?:cm|sf|ec|lm)bx|-medi(?:ital)?$")


_ITALIC = re.compile(r"italic|oblique|-(?:bd)?it$|^(?:cm|sf|ec|lm)ti\d")


def is_italic(font: str) -> bool:
    """From a font name without its subset tag, as `word_box` gives it."""
    return _ITALIC.search(font.lower()) is not None


def is_bold(font: str) -> bool:
    """From a font name without its subset tag, as `word_box` gives it."""
    return _BOLD.search(font.lower()) is not None
