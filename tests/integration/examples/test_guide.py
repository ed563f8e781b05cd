"""docs/library.md cannot rot: each of its code blocks names, on its first
line, the example it is cut from, and must still be a run of whole lines
of that file; the file must be an example the build makes and a test here
starts (or the CMake project the packaging test builds with)."""

import pathlib
import re

REPO = pathlib.Path(__file__).resolve().parents[3]
GUIDE = REPO / "docs" / "library.md"
TESTS = pathlib.Path(__file__).parent
FENCE = re.compile(r"^```(\w*)\n(.*?)^```$", re.M | re.S)


def blocks():
    for match in FENCE.finditer(GUIDE.read_text()):
        yield match.group(1), match.group(2).rstrip("\n").split("\n")


def built_examples():
    listed = re.search(r"foreach\(example ([^)]*)\)", (REPO / "examples" / "CMakeLists.txt").read_text())
    return set(listed.group(1).split())


def started_by_tests():
    started = set()
    for test in TESTS.glob("test_*.py"):
        text = test.read_text()
        started |= set(re.findall(r'example\("(\w+)"', text))
        started |= set(re.findall(r'EXAMPLES_DIR / "(\w+)"', text))
    return started


def test_every_code_block_is_cut_from_a_built_and_tested_example():
    examples = built_examples()
    started = started_by_tests()
    checked = 0
    for language, lines in blocks():
        if language == "sh":
            continue  # commands (the pkg-config build is test_packaging.py's)
        marker = re.fullmatch(r"(?://|#) (examples/\S+)", lines[0])
        assert marker, f"a {language} block of the guide does not name its file: {lines[:2]}"
        path = REPO / marker.group(1)
        source = path.read_text().split("\n")
        body = lines[1:]
        assert body, f"an empty block cut from {path}"
        starts = [i for i, line in enumerate(source) if line == body[0]]
        assert any(source[i:i + len(body)] == body for i in starts), (
            f"a block of the guide is no longer in {marker.group(1)}: it begins {body[0]!r}")
        if path.suffix == ".cc":
            assert path.stem in examples, f"{path.stem} is not built (examples/CMakeLists.txt)"
            assert path.stem in started, f"no test in {TESTS} starts {path.stem}"
        checked += 1
    assert checked >= 10


def test_every_example_is_started_by_a_test():
    assert built_examples() - started_by_tests() == set()
