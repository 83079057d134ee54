// The queue page reloads itself when the queue changes (a new item, a decision elsewhere):
// it polls /queue.json and compares the stamp with the one the page was rendered with.
"use strict";
(function () {
  var table = document.getElementById("queue");
  if (!table) { return; }
  var stamp = table.getAttribute("data-stamp");
  function poll() {
    fetch("/queue.json", { credentials: "same-origin", cache: "no-store" })
      .then(function (r) { return r.ok ? r.json() : null; })
      .then(function (j) {
        if (j && j.stamp !== stamp) { window.location.reload(); }
      })
      .catch(function () {});
  }
  window.setInterval(poll, 3000);
})();
