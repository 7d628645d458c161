// The try-it page: post the form, read this page's own event stream and show the reply as it
// arrives; the injection panel comes rendered from the server. Without script the form posts.
(function () {
  "use strict";

  var form = document.querySelector("[data-tryit-form]");
  if (!form) { return; }
  var log = form.querySelector("[data-tryit-log]");
  var panel = document.getElementById("tryit-injected");
  var errorBox = form.querySelector("[data-tryit-error]");
  var errorText = form.querySelector("[data-tryit-error-text]");
  var state = form.querySelector("[data-tryit-state]");
  var send = form.querySelector("[data-tryit-send]");
  var historyField = form.querySelector("[data-tryit-history]");
  var history = [];

  function turn(role, label, text) {
    var item = document.createElement("li");
    item.className = "tryit-turn tryit-" + role;
    var name = document.createElement("span");
    name.className = "tryit-role";
    name.textContent = label;
    var body = document.createElement("p");
    body.textContent = text;
    item.appendChild(name);
    item.appendChild(body);
    log.appendChild(item);
    return item;
  }

  function showError(message) {
    errorText.textContent = message;
    errorBox.hidden = false;
  }

  function showState(key) {
    state.textContent = state.getAttribute(key);
    state.hidden = false;
  }

  // One SSE event block ("event: x\ndata: {...}") -> [name, data].
  function parseEvent(block) {
    var name = "message";
    var data = "";
    block.split("\n").forEach(function (line) {
      if (line.indexOf("event:") === 0) { name = line.slice(6).trim(); }
      if (line.indexOf("data:") === 0) { data += line.slice(5).trim(); }
    });
    try { return [name, JSON.parse(data)]; } catch (e) { return [name, {}]; }
  }

  form.addEventListener("submit", function (event) {
    event.preventDefault();
    var area = form.querySelector("textarea[name=message]");
    var text = area.value.trim();
    if (!text) {  // say so rather than do nothing (the server says the same without script)
      showError(state.getAttribute("data-empty-text"));
      area.focus();
      return;
    }
    errorBox.hidden = true;
    historyField.value = JSON.stringify(history);
    var body = new URLSearchParams(new FormData(form));
    var labels = [state.getAttribute("data-you-text"), state.getAttribute("data-reply-text")];
    turn("user", labels[0], text);
    var reply = turn("assistant", labels[1], "");
    reply.setAttribute("data-tryit-reply", "streaming");
    var replyText = reply.querySelector("p");
    send.disabled = true;
    showState("data-streaming-text");
    var finished = false;

    function handle(name, data) {
      if (name === "injected") {
        panel.innerHTML = data.html;  // rendered and escaped by the server
      } else if (name === "delta") {
        replyText.textContent += data.text;
      } else if (name === "done") {
        finished = true;
        replyText.textContent = data.text;
        reply.setAttribute("data-tryit-reply", "done");
        history.push({role: "user", content: text});
        history.push({role: "assistant", content: data.text});
        area.value = "";
        showState("data-done-text");
      } else if (name === "failed") {
        finished = true;
        reply.setAttribute("data-tryit-reply", "failed");
        showError(data.message || "");
        state.hidden = true;
      }
    }

    fetch(form.action, {method: "POST", body: body, credentials: "same-origin",
                        headers: {"Accept": "text/event-stream"}})
      .then(function (response) {
        var reader = response.body.getReader();
        var decoder = new TextDecoder();
        var buffer = "";
        function pump() {
          return reader.read().then(function (chunk) {
            if (chunk.done) { return; }
            buffer += decoder.decode(chunk.value, {stream: true});
            var blocks = buffer.split("\n\n");
            buffer = blocks.pop();
            blocks.forEach(function (block) {
              if (block.trim()) { handle.apply(null, parseEvent(block)); }
            });
            return pump();
          });
        }
        return pump();
      })
      .catch(function () { finished = false; })
      .then(function () {
        if (!finished) {
          reply.setAttribute("data-tryit-reply", "failed");
          showError(state.getAttribute("data-network-text"));
          state.hidden = true;
        }
        send.disabled = false;
      });
  });
})();
