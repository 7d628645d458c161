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

  // A search weight is a number input in the HTML; with this script it becomes a native
  // slider (arrow keys, Home/End) and an <output> beside it shows its value.
  function enhanceSliders(root) {
    root.querySelectorAll("input[type=number][data-slider]").forEach(function (input) {
      var output = document.createElement("output");
      output.id = input.getAttribute("data-slider");
      output.htmlFor = input.id;
      output.className = "slider-value";
      output.setAttribute("aria-live", "off");  // the slider announces its own value
      input.type = "range";
      input.removeAttribute("inputmode");
      input.classList.add("slider");
      output.value = input.value;
      var row = document.createElement("div");
      row.className = "slider-row";
      input.insertAdjacentElement("beforebegin", row);
      row.appendChild(input);
      row.appendChild(output);
    });
  }

  function showSliderValue(input) {
    var output = document.getElementById(input.getAttribute("data-slider"));
    if (output) {
      output.value = input.value;
    }
  }

  enhanceSliders(document);
  document.addEventListener("htmx:load", function (event) {
    enhanceSliders(event.target);
  });

  document.addEventListener("input", function (event) {
    var element = event.target;
    if (element.matches("textarea[data-count-target]")) {
      countCharacters(element);
    } else if (element.matches("input[type=range][data-slider]")) {
      showSliderValue(element);
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
