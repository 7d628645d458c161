"""The title-request detector: real clients' title prompts are caught, real chats are not."""

from __future__ import annotations

import pytest

from pawwake.chat.auxiliary import is_auxiliary, is_title_request

CHAT = "user: 今天好累\nassistant: 抱抱你，早点休息。\n" * 3

TITLE_REQUESTS = [
    # Kelivo-style: instruction first, dialogue in a block.
    [{"role": "user", "content": "I will give you some dialogue content in the `<content>` "
      "block. You need to summarize the conversation between user and assistant into a short "
      "title.\n1. The title language should be consistent with the user's primary language\n"
      f"2. The title should not exceed 10 characters\n<content>{CHAT}</content>"}],
    # Open WebUI-style task prompt.
    [{"role": "user", "content": "### Task:\nGenerate a concise, 3-5 word title with an emoji "
      f"summarizing the chat history.\n### Chat History:\n<chat_history>\n{CHAT * 40}"
      "</chat_history>"}],
    # ChatBox-style: instruction after a long quoted dialogue.
    [{"role": "user", "content": f"```\n{CHAT * 40}```\nName this conversation in 10 "
      "characters or less. Only give the name, nothing else. The name is:"}],
    # LobeChat / Cherry Studio style: the instruction in a system message.
    [{"role": "system", "content": "你是一名擅长会话的助理，你需要将用户的会话总结为 10 个字以内的标题"},
     {"role": "user", "content": CHAT}],
    [{"role": "system", "content": "Summarize the conversation into a title in Chinese within "
      "10 characters without punctuation. Output only the title string."},
     {"role": "user", "content": [{"type": "text", "text": CHAT}]}],
    [{"role": "user", "content": "请根据以下对话内容，生成一个简短的标题（不超过10个字）：\n" + CHAT}],
]

REAL_CHATS = [
    [{"role": "user", "content": "你好"}],
    [{"role": "user", "content": "帮我简要总结一下这段对话：\n" + CHAT}],  # a real request
    [{"role": "user", "content": "What is a good title for my novel about a cat?"}],
    [{"role": "user", "content": "Give this conversation a short title"},
     {"role": "assistant", "content": "Sure"},
     {"role": "user", "content": "Actually tell me a joke"}],
    [{"role": "user", "content": "写一个短标题"}, {"role": "user", "content": "关于春天的对话"}],
    [{"role": "user", "content": "Short chat: what's the title of Beethoven's 5th?"},
     {"role": "tool", "tool_call_id": "x", "content": "x"}],
    [{"role": "system", "content": "You are a helpful assistant."},
     {"role": "user", "content": "Let's chat about movie titles, briefly."}],
]


@pytest.mark.parametrize("messages", TITLE_REQUESTS)
def test_title_requests_are_recognised(messages: list[dict[str, object]]) -> None:
    assert is_title_request(messages)


@pytest.mark.parametrize("messages", REAL_CHATS)
def test_real_chats_are_not_title_requests(messages: list[dict[str, object]]) -> None:
    assert not is_title_request(messages)


def test_skip_header_marks_any_request_auxiliary() -> None:
    body = {"messages": [{"role": "user", "content": "你好"}]}
    assert is_auxiliary({"X-Skip-Conversation-Log": "true"}, body)
    assert is_auxiliary({"X-Skip-Conversation-Log": "1"}, body)
    assert not is_auxiliary({"X-Skip-Conversation-Log": "false"}, body)
    assert not is_auxiliary({}, body)
    assert is_auxiliary({}, {"messages": TITLE_REQUESTS[0]})
