// Memory pages: select-all, the floating action bar and confirmation dialogs.
// Every control also works without this script (the server asks for confirmation itself).
(function () {
  "use strict";

  document.body.classList.add("js-memories");

  function rowBoxes() {
    return Array.prototype.slice.call(
      document.querySelectorAll("input[data-row-select]"));
  }

  function updateBulkBar() {
    var bar = document.querySelector("[data-bulk-bar]");
    if (!bar) { return; }
    var boxes = rowBoxes();
    var checked = boxes.filter(function (box) { return box.checked; }).length;
    var count = bar.querySelector("[data-bulk-count]");
    if (count && checked > 0) {
      count.textContent = count.getAttribute("data-selected-text").replace("{count}", String(checked));
    }
    bar.classList.toggle("is-active", checked > 0);
    var all = document.querySelector("[data-select-all]");
    if (all) {
      all.checked = checked > 0 && checked === boxes.length;
      all.indeterminate = checked > 0 && checked < boxes.length;
    }
  }

  document.addEventListener("change", function (event) {
    var element = event.target;
    if (element.matches("[data-select-all], input[data-row-select]")) {
      var result = document.getElementById("bulk-result");
      if (result) {  // an answer about the last selection
        result.textContent = "";
        result.removeAttribute("data-bulk-result");
      }
    }
    if (element.matches("[data-select-all]")) {
      rowBoxes().forEach(function (box) { box.checked = element.checked; });
      updateBulkBar();
    } else if (element.matches("input[data-row-select]")) {
      updateBulkBar();
    }
  });

  // A dialog sent by the server (the merge form) opens as a modal; closing it removes it.
  function showDialogs() {
    document.querySelectorAll("dialog[data-autoshow]").forEach(function (dialog) {
      if (!dialog.open && typeof dialog.showModal === "function") {
        dialog.addEventListener("close", function () { dialog.remove(); });
        dialog.showModal();
      }
    });
  }

  document.addEventListener("click", function (event) {
    var closer = event.target.closest("dialog [data-dialog-close]");
    if (closer) {
      event.preventDefault();
      closer.closest("dialog").close();
    }
  });

  document.addEventListener("htmx:afterSettle", function () {
    updateBulkBar();
    showDialogs();
  });

  // hx-confirm questions open our own dialog instead of the browser's window.confirm().
  document.addEventListener("htmx:confirm", function (event) {
    var question = event.detail.question;
    var dialog = document.getElementById("memory-confirm");
    if (!question || !dialog || typeof dialog.showModal !== "function") { return; }
    event.preventDefault();
    dialog.querySelector(".dialog-text").textContent = question;
    dialog.returnValue = "";
    dialog.addEventListener("close", function answered() {
      dialog.removeEventListener("close", answered);
      if (dialog.returnValue === "ok") {
        event.detail.issueRequest(true);
      }
    });
    dialog.showModal();
    var cancel = dialog.querySelector("[data-dialog-cancel]");
    if (cancel) { cancel.focus(); }
  });

  updateBulkBar();
  showDialogs();
})();
