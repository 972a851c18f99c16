"""Markdown outputs (summary.md, health-report.md) show host text as it is, with no HTML entities:
checked against a CommonMark renderer (markdown-it-py), with generated text."""
import html

from hypothesis import given, settings, strategies as st
from markdown_it import MarkdownIt

from probe_agent.report import clean
from sweep.report.markdown import md

COMMONMARK = MarkdownIt("commonmark")  # raw HTML and entities enabled, as GitHub and most viewers have them
TEXT = st.text(alphabet=st.sampled_from("ab1 <>&;#/!?=-_*`[]()|\\:\"'.x"), max_size=40)
# health-report.md keeps emphasis and links as the agent writes them; what it must stop is HTML and entities
AGENT_TEXT = st.text(alphabet=st.sampled_from("ab1 <>&;#/?=-()|\\:\"'.x"), max_size=40)


def rendered_text(markdown: str) -> tuple[str, list[str]]:
    """(the text a reader sees, the token types) of one Markdown paragraph."""
    tokens = COMMONMARK.parse(markdown)
    inline = [t for t in tokens if t.type == "inline"]
    children = [c for t in inline for c in t.children or []]
    return "".join(c.content for c in children if c.type in ("text", "code_inline")), [c.type for c in children]


def reads_back(escape, text):
    seen, types = rendered_text("Detail: " + escape(text))
    assert set(types) <= {"text", "softbreak"}, (text, escape(text), types)
    assert " ".join(seen.split()) == " ".join(("Detail: " + text).split())


@settings(max_examples=300, deadline=None)
@given(TEXT)
def test_host_text_in_summary_md_reads_back_exactly_and_never_becomes_html(text):
    reads_back(md, text)


@settings(max_examples=300, deadline=None)
@given(AGENT_TEXT)
def test_host_text_in_health_report_md_never_becomes_html_or_an_entity(text):
    reads_back(clean, text)


def test_no_html_entity_is_written():
    for escape in (md, clean):
        out = escape("a <= b & c, <b>bold</b>, &amp; and &#60;")
        assert "&lt;" not in out and "&gt;" not in out and "&amp;amp;" not in out
        assert "<= b & c" in out
        rendered = COMMONMARK.render("x " + out)
        assert html.unescape(rendered) == "<p>x a <= b & c, <b>bold</b>, &amp; and &#60;</p>\n"
