// Filter the trajectory viewer by text (task id, harness, status); works offline, no dependencies.
(function () {
  var box = document.getElementById("filter");
  if (!box) return;
  box.addEventListener("input", function () {
    var q = box.value.toLowerCase();
    var shown = 0;
    document.querySelectorAll("section.rollout").forEach(function (s) {
      var hit = !q || (s.getAttribute("data-search") || "").indexOf(q) >= 0;
      s.style.display = hit ? "" : "none";
      if (hit) shown++;
    });
    var c = document.getElementById("filter-count");
    if (c) c.textContent = shown + " shown";
  });
  // open the rollout a link points to
  function openTarget() {
    var el = location.hash && document.getElementById(location.hash.slice(1));
    while (el) { if (el.tagName === "DETAILS") el.open = true; el = el.parentElement; }
  }
  window.addEventListener("hashchange", openTarget);
  openTarget();
  document.documentElement.setAttribute("data-report", "ready");  // the script ran to the end
})();
