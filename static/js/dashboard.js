// Small enhancements for the dashboard; every page also works without them.
(function () {
  "use strict";

  // Characters as people count them (code points), the same as the server's len().
  function countCharacters(area) {
    var target = document.getElementById(area.getAttribute("data-count-target"));
    if (target) {
      target.textContent = String(Array.from(area.value).length);
    }
  }

  function filterSettings(query) {
    var words = query.trim().toLowerCase().split(/\s+/).filter(Boolean);
    document.querySelectorAll("[data-settings-group]").forEach(function (group) {
      var visible = 0;
      group.querySelectorAll("[data-search]").forEach(function (row) {
        var text = row.getAttribute("data-search");
        var match = words.every(function (word) { return text.indexOf(word) !== -1; });
        row.hidden = !match;
        if (match) { visible += 1; }
      });
      group.hidden = visible === 0;
    });
  }

  function currentFilter() {
    var input = document.querySelector("[data-filter-settings]");
    return input ? input.value : "";
  }

  document.addEventListener("input", function (event) {
    var element = event.target;
    if (element.matches("textarea[data-count-target]")) {
      countCharacters(element);
    } else if (element.matches("[data-filter-settings]")) {
      filterSettings(element.value);
    }
  });

  // A group swapped in after saving keeps the filter that is typed.
  document.addEventListener("htmx:afterSettle", function () {
    if (currentFilter()) {
      filterSettings(currentFilter());
    }
  });
})();
