"""``user_frame``: the user's own line in an FX node's stack trace (``gap``'s "at" line, the inside-delegates rows)."""

from __future__ import annotations

from etlens.builder.inside.graph import node_source_line, user_frame

TRACE = '''  File "/home/me/model.py", line 12, in forward
    return self.fc2(self.act(self.fc1(x)))
  File "/usr/lib/python3/site-packages/torch/nn/modules/module.py", line 1775, in _call_impl
    return forward_call(*args, **kwargs)
  File "/src/torch/nn/modules/linear.py", line 134, in forward
    return F.linear(input, self.weight, self.bias)
'''


def test_innermost_user_frame_not_torch():
    assert user_frame(TRACE) == "/home/me/model.py:12 in forward: return self.fc2(self.act(self.fc1(x)))"


def test_only_library_frames_give_the_innermost_and_no_frames_the_first_line():
    torch_only = TRACE.split("  File \"/usr")[1]
    assert user_frame("  File \"/usr" + torch_only).startswith("/src/torch/nn/modules/linear.py:134 in forward: ")
    assert user_frame("no frames here\nsecond") == "no frames here"
    assert user_frame(None) is None and user_frame("") is None


def test_node_source_line_reads_the_node_meta():
    class Node:
        meta = {"stack_trace": TRACE}

    assert node_source_line(Node()) == user_frame(TRACE)
