"""The VLMEvalKit readers ported in evalkit.grading.vlmeval, on the shapes where evalkit's own readers differ.

Every expected verdict below was worked out by hand from VLMEvalKit's code
(open-compass/VLMEvalKit@3ba9220a vlmeval/utils/matching_util.py and vlmeval/dataset/utils/tdbench.py;
the "latest" column from e8e78f0): tokens are the reply with .()[],:;!*#{} turned into spaces, split
on whitespace; a letter counts only as a whole token; a box is exactly one `a, b, c, d` match of
numbers with at most one digit before the point.
"""

from __future__ import annotations

import pytest

from evalkit.grading import vlmeval as vk

OPTS = {"A": "bus", "B": "red car", "C": "truck", "D": "blue car"}


@pytest.mark.parametrize(
    ("reply", "at_3ba9220a", "latest"),
    [
        ("D's position matches", None, None),  # the apostrophe is no separator: "D's" is one token
        ("答案：A", None, None),  # a full-width colon is no separator either
        ("Option-D", None, None),  # nor a hyphen
        ("<think>I considered A and C.</think>B", None, None),  # thinking is read too: A and C, two letters
        ("<think>hmm</think>B", None, None),  # "</think>B" is one token
        ("<think>\nLet me see.\n</think>\nB", "B", "B"),  # ...unless whitespace splits it off
        ("A red car is visible in the lower left.", "A", "B"),  # the article is option A; later: "red car"
        ("The answer is (C)", "C", "C"),
        ("**C**", "C", "C"),
        ("I think C", "C", "C"),
        ("", None, None),
        ("Sorry, I can't help with images of people yet.", "Z", "Z"),  # one of its refusal strings
        ("Cannot determine the answer from this picture", "Z", "Z"),
        ("I'm sorry, but I cannot help with that.", None, None),  # any other refusal: the extractor's
        ("Z", "Z", "Z"),  # a lone Z and no letter
        ("Failed to obtain answer via API.", None, None),
        ("It is the blue car", "D", "D"),  # option text, when exactly one option's text is in the reply
        ("the red car is next to the blue car", None, None),  # two options' texts
        ("A or B", None, None),  # several letters
        ("A, B", None, None),
        ("B. red car", "B", "B"),
        # the later rules: a lone letter only among the last four tokens, "answer is X", a length cap
        ("The correct answer is **B**. Here's why: A is wrong because", None, "B"),
        ("the answer is b", None, "B"),
        ("C is correct because the truck is parked on the left side of the road", "C", None),
    ],
)
def test_can_infer(reply, at_3ba9220a, latest):
    assert vk.can_infer(reply, OPTS) == at_3ba9220a
    assert vk.can_infer(reply, OPTS, "latest") == latest


def test_can_infer_leaves_its_choices_alone_and_knows_its_variants():
    opts = dict(OPTS)
    assert vk.can_infer("RED CAR", opts) == "B" and opts == OPTS  # the original lower-cases in place
    assert vk.tokens("(A) [B]: c;d!*#{e}") == ["A", "B", "c", "d", "e"]
    with pytest.raises(ValueError, match="unknown VLMEvalKit parser"):
        vk.can_infer("A", OPTS, "newest")


@pytest.mark.parametrize(
    ("reply", "box"),
    [
        ("[0.1, 0.2, 0.3, 0.4]", (0.1, 0.2, 0.3, 0.4)),
        ("0.1,0.2,0.3,0.4", (0.1, 0.2, 0.3, 0.4)),  # the space after a comma is optional
        ("(0.1,\n0.2, 0.3, 0.4)", (0.1, 0.2, 0.3, 0.4)),  # newlines are removed first
        ("[.5, .5, 1, 1]", (0.5, 0.5, 1.0, 1.0)),
        ("The box is [0.125, 0.5, 0.75, 1.0].\nConfidence: 0.9", (0.125, 0.5, 0.75, 1.0)),
        ("[0.1, 0.2, 0.3, 0.4, 0.5]", (0.1, 0.2, 0.3, 0.4)),  # one match; the fifth number has no partner
        ("[2, 3, 4, 5]", (2.0, 3.0, 4.0, 5.0)),  # single digits fit: taken as given
        ("[12, 40, 200, 300]", None),  # pixels: two-digit numbers never fit
        ("0.1 0.2 0.3 0.4", None),  # no commas
        ("x1=0.1, y1=0.2, x2=0.3, y2=0.4", None),  # labels between the numbers
        ("[0.1, 0.2, 0.3, 0.4] and [0.5, 0.6, 0.7, 0.8]", None),  # two boxes
        ("<think>maybe 0.2, 0.2, 0.4, 0.4</think>[0.1, 0.2, 0.3, 0.4]", None),  # thinking adds a match
        ("[0.1,  0.2, 0.3, 0.4]", None),  # two spaces after a comma
        ("[0.10, 0.25, 10.5, 0.9]", None),
        ("[, , , ]", None),  # a match of empty numbers: VLMEvalKit's float('') fails, scored 0
        ("", None),
    ],
)
def test_extract_bbox(reply, box):
    got = vk.extract_bbox(reply)
    assert got == (pytest.approx(box) if box else None)


def test_box_scores_as_vlmevalkit_computes_them():
    assert vk.bbox_iou((0, 0, 0.5, 0.5), (0.25, 0.25, 0.75, 0.75)) == pytest.approx(0.0625 / 0.4375)
    assert vk.bbox_iou((0, 0, 0.2, 0.2), (0.5, 0.5, 0.7, 0.7)) == 0.0
    assert vk.bbox_iou((0.3, 0.3, 0.3, 0.3), (0.3, 0.3, 0.3, 0.3)) == 0.0  # zero union: its exception, 0
    assert vk.centroid_inside((0.3, 0.3, 0.5, 0.5), (0.35, 0.35, 0.45, 0.45))
    assert vk.centroid_inside((0.5, 0.5, 0.3, 0.3), (0.35, 0.35, 0.45, 0.45))  # corners as given
    assert vk.centroid_inside((0.0, 0.0, 0.2, 0.2), (0.1, 0.1, 0.3, 0.3))  # the edge counts
    assert not vk.centroid_inside((0.0, 0.0, 0.2, 0.2), (0.35, 0.35, 0.45, 0.45))


def test_extractor_prompt_is_vlmevalkits():
    prompt = vk.judge_prompt("Which car is parked {left}", {"A": "bus", "B": "red car"}, "It's the {red} one")
    assert prompt == (
        "You are an AI assistant who will help me to match an answer with several options of a single-choice "
        "question. You are provided with a question, several options, and an answer, and you need to find which "
        "option is most similar to the answer. If the meaning of all options are significantly different from "
        "the answer, output Z. Your should output a single uppercase character in A, B, C, D (if they are valid "
        "options), and Z. \nExample 1: \nQuestion: What is the main object in image?\nOptions: A. teddy bear "
        "B. rabbit C. cat D. dog\nAnswer: a cute teddy bear\nYour output: A\nExample 2: \nQuestion: What is the "
        "main object in image?\nOptions: A. teddy bear B. rabbit C. cat D. dog\nAnswer: Spider\nYour output: Z\n"
        "Example 3: \nQuestion: Which car is parked {left}?\nOptions: There are several options: \nA. bus\n"
        "B. red car\n\nAnswer: It's the {red} one\nYour output: "
    )
    cn = vk.judge_prompt("哪辆车在左边", {"A": "公交车"}, "公交车")
    assert cn.startswith("你是一个帮助我匹配答案与单选题中多个选项的 AI 助手。")
    assert cn.endswith("例 3: \n问题: 哪辆车在左边?\n选项: There are several options: \nA. 公交车\n\n答案: 公交车\n输出: ")
