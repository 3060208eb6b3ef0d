// The dashboard's one script: live updates and the forget action (docs/dashboard.md).
// It never builds markup from data: what it inserts is HTML the server rendered (and escaped),
// and what it reports is set as text.
"use strict";

(function () {
  const main = document.getElementById("live");
  const status = document.getElementById("live-status");
  if (!main) {
    return;
  }
  const pollMs = Number(main.dataset.pollMs) || 2000;
  let version = null;

  function say(text) {
    if (status) {
      status.textContent = text;
    }
  }

  async function refreshWhole() {
    const answer = await fetch(main.dataset.live, { cache: "no-store" });
    const latest = (await answer.json()).version;
    if (version !== null && latest !== version) {
      const url = new URL(window.location.href);
      url.searchParams.set("fragment", "1");
      const page = await fetch(url, { cache: "no-store" });
      if (page.ok) {
        main.innerHTML = await page.text();
        bindForget();
      }
    }
    version = latest;
  }

  async function refreshNewer() {
    const rows = document.getElementById("timeline-rows");
    if (!rows) {
      return;
    }
    const first = rows.querySelector("tr[data-key]");
    const url = new URL(main.dataset.newer, window.location.href);
    url.searchParams.set("after", first ? first.dataset.key : "0:0");
    const answer = await fetch(url, { cache: "no-store" });
    if (!answer.ok) {
      throw new Error("HTTP " + answer.status);
    }
    const html = (await answer.text()).trim();
    if (html) {
      const holder = document.createElement("tbody");
      holder.innerHTML = html;
      const fresh = Array.from(holder.children);
      for (const row of fresh.reverse()) {
        row.classList.add("fresh");
        rows.insertBefore(row, rows.firstChild);
      }
      const empty = document.querySelector("p.empty");
      if (empty) {
        empty.remove();
      }
    }
  }

  async function tick() {
    try {
      if (main.dataset.newer) {
        await refreshNewer();
      } else if (main.dataset.live) {
        await refreshWhole();
      }
      say("live · checked " + new Date().toLocaleTimeString());
    } catch (error) {
      say("live update failed: " + error);
    }
    window.setTimeout(tick, pollMs);
  }

  function bindForget() {
    const report = document.getElementById("forget-status");
    for (const button of document.querySelectorAll("button.forget")) {
      button.addEventListener("click", async function () {
        const token = document.getElementById("admin-token");
        const answer = await fetch(button.dataset.url, {
          method: "POST",
          headers: {
            "Content-Type": "application/json",
            Authorization: "Bearer " + (token ? token.value : ""),
          },
          body: JSON.stringify({ kind: button.dataset.kind, key: button.dataset.key }),
        });
        let detail = "";
        try {
          detail = (await answer.json()).detail || "";
        } catch (error) {
          detail = "";
        }
        if (answer.ok) {
          button.closest("tr").remove();
          report.textContent = "forgotten: " + button.dataset.kind;
        } else {
          report.textContent = "not forgotten (" + answer.status + "): " + detail;
        }
      });
    }
  }

  if (main.dataset.newer || main.dataset.live) {
    window.setTimeout(tick, pollMs);
  }
  bindForget();
})();
