"""A griffe extension that renders the docstrings' reST habits as Markdown in the API reference.

The docstrings follow Python's own conventions, which are reStructuredText: Sphinx roles
(``:class:`RelationalBlock```), literal blocks introduced by ``::`` and doctest examples
(``>>> layer(x).shape``). mkdocstrings renders docstrings as Markdown, where a role stays literal
text, ``::`` stays literal and an indented block after it is only code by accident, and ``>>>``
lines become nested block quotes. This extension rewrites each docstring before griffe parses it:

* a role becomes inline code (``:class:`~a.b.C``` -> `` `C` ``, as Sphinx shows it);
* a paragraph ending with ``::`` ends with ``:`` and its indented block becomes a fenced block;
* a run of doctest lines (``>>>``, ``...`` and their output up to a blank line) becomes a
  fenced ``pycon`` block, which Pygments highlights.

Configured in mkdocs.yml (``extensions:``); tests/test_docs.py checks the built pages.
"""

import re

import griffe

# :class:`X`, :py:func:`X`, :data:`~a.b.X`, ... (Sphinx's Python-domain and generic roles)
_ROLE = re.compile(r":(?:py:)?(?:class|func|meth|data|attr|mod|obj|exc|const|ref|doc|term):"
                   r"`~?([^`]+)`")
_DOCTEST = re.compile(r"^(\s*)>>>( |$)")


def _role_text(match):
    target = match.group(1)
    if target.startswith("~") or match.group(0).split("`")[1].startswith("~"):
        target = target.rsplit(".", 1)[-1]
    return f"`{target}`"


def _indent(line):
    return len(line) - len(line.lstrip())


def _literal_blocks(lines):
    """``text::`` + blank + indented block -> ``text:`` + a fenced block at the text's indent."""
    out, i = [], 0
    while i < len(lines):
        line = lines[i]
        stripped = line.rstrip()
        if not stripped.endswith("::") or stripped.lstrip().startswith((">>>", "...")):
            out.append(line)
            i += 1
            continue
        base = _indent(line)
        j = i + 1
        while j < len(lines) and not lines[j].strip():
            j += 1
        if j >= len(lines) or _indent(lines[j]) <= base:
            out.append(line)  # not a literal block: leave it
            i += 1
            continue
        end = j
        while end < len(lines) and (not lines[end].strip() or _indent(lines[end]) > base):
            end += 1
        while end > j and not lines[end - 1].strip():
            end -= 1
        text = stripped[:-2].rstrip()
        if text.strip():
            out.append(text + ":")
            out.append("")
        block_indent = min(_indent(b) for b in lines[j:end] if b.strip())
        pad = " " * base
        out.append(pad + "```python")
        out.extend(pad + b[block_indent:] if b.strip() else "" for b in lines[j:end])
        out.append(pad + "```")
        i = end
    return out


def _doctest_blocks(lines):
    """Runs of ``>>>`` / ``...`` lines with their output (up to a blank line) -> ``pycon``."""
    out, i, fenced = [], 0, False
    while i < len(lines):
        line = lines[i]
        if line.lstrip().startswith("```"):
            fenced = not fenced
        match = None if fenced else _DOCTEST.match(line)
        if match is None:
            out.append(line)
            i += 1
            continue
        pad = match.group(1)
        end = i
        while end < len(lines) and lines[end].strip() and _indent(lines[end]) >= len(pad):
            end += 1
        if out and out[-1].strip():
            out.append("")
        out.append(pad + "```pycon")
        out.extend(lines[i:end])
        out.append(pad + "```")
        i = end
    return out


def to_markdown(text):
    """The docstring ``text`` with roles, ``::`` blocks and doctests written as Markdown."""
    text = _ROLE.sub(_role_text, text)
    lines = _literal_blocks(text.split("\n"))
    return "\n".join(_doctest_blocks(lines))


class DocstringMarkup(griffe.Extension):
    def on_instance(self, *, obj, **kwargs):
        if obj.docstring is not None:
            obj.docstring.value = to_markdown(obj.docstring.value)
