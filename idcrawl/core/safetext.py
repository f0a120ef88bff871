"""Text that is safe to print: secrets in URLs masked, control characters escaped, names checked.

One place for what every log line, error, stat, command table and report does before it shows
text that came from a user, a setting, a state file or a site: :func:`mask_secrets` hides the
password of every ``scheme://user:password@host`` in a text, :func:`escape_text` turns line
breaks, terminal escapes and other unprintable characters into visible escapes, :func:`safe`
does both, and :func:`name_problem` says what is wrong with a target, crawl profile or
collection name.
"""

from __future__ import annotations

import re

__all__ = ["MASK", "NAME_MAX_LENGTH", "escape_text", "mask_secrets", "mask_url", "name_problem", "safe"]

#: What stands for a hidden password.
MASK = "***"

#: The longest target, crawl-profile or collection name accepted.
NAME_MAX_LENGTH = 200

# scheme://userinfo@ : userinfo runs to the last '@' before the host's end ('/', '?', '#', space).
# Each pattern starts with a literal, which the regex engine looks for first (a long text is quick).
_USERINFO = re.compile(r"://(?P<userinfo>[^/?#\s@]*(?:@[^/?#\s@]*)*)@")
# user:password@host without a scheme (a URL's netloc quoted alone, as in "invalid hostname: u:pw@h"):
# the user before the ':' is checked by _bare_password
_BARE_PASSWORD = re.compile(r":(?P<password>[^\s/?#@'\"]+)@(?=[\w\[])")
_BEFORE_USER = frozenset(" \t\n\r\f\v'\"(<[")


def _masked_userinfo(userinfo: str) -> str:
    user, colon, _password = userinfo.partition(":")
    if colon:
        return f"{user}:{MASK}"
    return MASK  # a lone userinfo is often a token (https://token@host)


def mask_url(url: str) -> str:
    """``url`` with the password of its userinfo masked (``redis://:***@host:6379/0``)."""
    return mask_secrets(url)


def mask_secrets(text: str) -> str:
    """``text`` with the password of every ``scheme://user:password@`` in it masked, and of every
    ``user:password@host`` standing alone (a netloc quoted in an error message)."""
    if "@" not in text:
        return text
    text = _USERINFO.sub(lambda m: f"://{_masked_userinfo(m['userinfo'])}@", text)
    return _BARE_PASSWORD.sub(_bare_password, text)


def _bare_password(match: re.Match[str]) -> str:
    """``:***@`` if a user name (word characters, ``.%+-``) that starts the text or follows a space,
    a quote or an opening bracket comes before the ``:``; else the match unchanged."""
    text, start = match.string, match.start()
    while start and (text[start - 1].isalnum() or text[start - 1] in "_.%+-"):
        start -= 1
    if start and text[start - 1] not in _BEFORE_USER:
        return match.group()
    return f":{MASK}@"


def _escape_char(ch: str) -> str:
    code = ord(ch)
    if ch == "\n":
        return "\\n"
    if ch == "\r":
        return "\\r"
    if ch == "\t":
        return "\\t"
    if code < 0x100:
        return f"\\x{code:02x}"
    if code < 0x10000:
        return f"\\u{code:04x}"
    return f"\\U{code:08x}"


def escape_text(text: str) -> str:
    """``text`` with every unprintable character (line breaks, ESC, BEL, C1 controls, separators,
    format characters) shown as a backslash escape, so it stays on one line and sends no
    terminal control sequence. Printable text, spaces included, is unchanged."""
    if text.isprintable():
        return text
    return "".join(ch if ch.isprintable() else _escape_char(ch) for ch in text)


def safe(text: object) -> str:
    """``str(text)`` with secrets masked and unprintable characters escaped."""
    return escape_text(mask_secrets(str(text)))


def name_problem(name: object, *, max_length: int = NAME_MAX_LENGTH) -> str | None:
    """What is wrong with a target, crawl-profile or collection name, or None: a name is a
    non-empty string of printable characters (no line break, no control character) of at most
    ``max_length`` characters, with no space at either end."""
    if not isinstance(name, str):
        return f"must be a string, not {type(name).__name__}"
    if not name:
        return "must not be empty"
    if len(name) > max_length:
        return f"is {len(name)} characters long (at most {max_length})"
    if not name.isprintable():
        return "holds a line break or a control character (a name is printable text on one line)"
    if name != name.strip():
        return "starts or ends with a space"
    return None
