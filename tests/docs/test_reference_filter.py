"""docs/reference/filter.py, which Doxygen reads the headers through: the
house's plain comments become documentation of what they stand above, the
line numbers stay the file's, and code inside bodies is left alone."""

import importlib.util
import pathlib

FILTER = pathlib.Path(__file__).resolve().parents[2] / "docs" / "reference" / "filter.py"
spec = importlib.util.spec_from_file_location("reference_filter", FILTER)
reference_filter = importlib.util.module_from_spec(spec)
spec.loader.exec_module(reference_filter)

HEADER = """\
// Widget: a thing to test the filter with.
//
// More about it.
#pragma once

namespace tern::net {

class Widget {
 public:
  // Reading: each of these.
  int size() const { return size_; }
  bool empty() const {
    // not documentation: inside a body
    return size_ == 0;
  }

  int count = 0;  // how many
  void alone();   // NOLINT: a note to a tool

  // Only one below: no group.
  void one();
};

}  // namespace tern::net
"""


def filtered():
    return reference_filter.convert(reference_filter.headline(HEADER.split("\n")))


def test_the_line_numbers_stay_the_files():
    assert len(filtered()) == len(HEADER.split("\n"))


def test_the_opening_comment_documents_the_class_it_names():
    out = filtered()
    assert out[0] == "/// Widget: a thing to test the filter with."
    assert out[3] == "/// \\class tern::net::Widget"  # in place of #pragma once


def test_a_comment_documents_each_declaration_below_it():
    out = filtered()
    opens = out.index("  /**@{*/ /// Reading: each of these.")  # the group opens with the comment
    closes = out.index("/**@}*/")  # on the blank line after the run
    assert out[opens + 1] == "  int size() const { return size_; }"
    assert out[closes - 1] == "  }" and out[closes + 1] == "  int count = 0;  ///< how many"


def test_comments_in_bodies_and_notes_to_tools_are_left_alone():
    out = filtered()
    assert "    // not documentation: inside a body" in out
    assert "  void alone();   // NOLINT: a note to a tool" in out
    assert "  int count = 0;  ///< how many" in out


def test_a_single_declaration_gets_its_comment_without_a_group():
    out = filtered()
    at = out.index("  /// Only one below: no group.")
    assert out[at - 1].strip() == "" and "@" not in out[at + 1]
