// The playground page: polls GET /messages and redraws the group; acts through the control API.
// Every string from the server goes into the page through textContent or an attribute, never parsed
// as HTML; no inline handlers, nothing remote (the page must work offline and under the CSP).
// Each string is shown as stored, the rule of web/markup.py: its own bidi isolate (<bdi>), with its
// invisible controls (bidi overrides, zero-width characters, ...) drawn as ⟨U+202E⟩ markers.
"use strict";

(function () {
  const POLL_MS = 400;
  const state = {
    data: null,
    raw: "",
    replyTo: null, // message id the next post replies to
    editing: null, // message id being edited
    picker: null, // message id whose reaction picker is open
  };
  // General categories Cc, Cf, Zl, Zp but tab, newline and the (visible) prepended concatenation marks;
  // group 1 is what stays as it is: an emoji tag sequence, a zero-width joiner before a symbol.
  const INVISIBLE =
    /(\u{1F3F4}[\u{E0020}-\u{E007E}]+\u{E007F}|\u200D(?=\p{So}))|(?![\t\n\u0600-\u0605\u06DD\u070F\u0890\u0891\u08E2\u{110BD}\u{110CD}])[\p{Cc}\p{Cf}\p{Zl}\p{Zp}]/gu;
  const $ = (id) => document.getElementById(id);
  const timeline = $("timeline");
  const composer = $("composer");
  const member = $("member");
  const status = $("status");

  // [run, isMarker] pairs: the text between invisible controls, and each control's marker.
  function runs(text) {
    const out = [];
    let at = 0;
    for (const found of text.matchAll(INVISIBLE)) {
      if (found[1] !== undefined) continue;
      const code = found[0].codePointAt(0).toString(16).toUpperCase().padStart(4, "0");
      out.push([text.slice(at, found.index), false], ["\u27E8U+" + code + "\u27E9", true]);
      at = found.index + found[0].length;
    }
    out.push([text.slice(at), false]);
    return out;
  }

  // For text only (an option's label, a tooltip): markers as plain text, each a left-to-right isolate.
  function plain(text) {
    return runs(String(text))
      .map(([run, marker]) => (marker ? "\u2066" + run + "\u2069" : run))
      .join("");
  }

  function shown(text) {
    const isolate = document.createElement("bdi");
    for (const [run, marker] of runs(String(text))) {
      if (marker) {
        const mark = document.createElement("span");
        mark.className = "ctl";
        mark.dir = "ltr";
        mark.textContent = run;
        isolate.appendChild(mark);
      } else if (run) {
        isolate.appendChild(document.createTextNode(run));
      }
    }
    return isolate;
  }

  function node(tag, className, text) {
    const made = document.createElement(tag);
    if (className) made.className = className;
    if (text !== undefined && text !== null) made.appendChild(shown(text));
    return made;
  }

  function button(className, label, onClick, title) {
    const made = node("button", className, label);
    made.type = "button";
    if (title) made.title = plain(title);
    made.addEventListener("click", onClick);
    return made;
  }

  function say(text, isError) {
    status.replaceChildren(...(text ? [shown(text)] : []));
    status.classList.toggle("error", Boolean(isError));
  }

  async function post(path, body) {
    const init = { method: "POST", credentials: "same-origin" };
    if (body instanceof FormData) {
      init.body = body;
    } else {
      init.headers = { "Content-Type": "application/json" };
      init.body = JSON.stringify(body);
    }
    const response = await fetch(path, init);
    let answer = {};
    try {
      answer = await response.json();
    } catch (_) {
      answer = { error: "HTTP " + response.status };
    }
    if (!response.ok || answer.ok === false) {
      throw new Error(answer.error || "HTTP " + response.status);
    }
    return answer;
  }

  async function act(path, body, done) {
    try {
      const answer = await post(path, body);
      say(done || "");
      await refresh(true);
      return answer;
    } catch (error) {
      say(error.message, true);
      return null;
    }
  }

  function current() {
    return member.value;
  }

  function byId(id) {
    if (!state.data) return null;
    return state.data.messages.find((m) => m.id === id) || null;
  }

  function author(message) {
    return message.is_bot ? state.data.bot.name : message.from;
  }

  function timeOf(date) {
    if (!date) return "";
    const when = new Date(date * 1000);
    return when.toLocaleTimeString([], { hour: "2-digit", minute: "2-digit" });
  }

  function excerpt(message) {
    if (!message) return "a message no longer here";
    if (message.deleted) return "deleted message";
    if (message.text) return message.text.length > 90 ? message.text.slice(0, 90) + "…" : message.text;
    if (message.recording) return message.recording.kind === "voice" ? "Voice message" : "Audio";
    return message.photo ? "Photo" : "";
  }

  function syncMembers(names) {
    const chosen = member.value;
    const have = Array.from(member.options).map((o) => o.value);
    if (have.length === names.length && have.every((n, i) => n === names[i])) return;
    member.replaceChildren();
    for (const name of names) {
      const option = document.createElement("option");
      option.textContent = "\u2068" + plain(name) + "\u2069"; // text only: FSI…PDI isolate it
      option.value = name;
      member.appendChild(option);
    }
    if (names.includes(chosen)) member.value = chosen;
  }

  function reactionsOf(message) {
    const box = node("div", "reactions");
    box.dataset.messageId = String(message.id);
    for (const reaction of message.reactions) {
      const mine = reaction.members.includes(current());
      const who = reaction.members.slice();
      if (reaction.bot) who.push(state.data.bot.name);
      const chip = button(
        "reaction" + (mine ? " mine" : "") + (reaction.bot ? " by-bot" : ""),
        reaction.emoji + " " + reaction.count,
        () => react(message, mine ? null : reaction.emoji),
        who.join(", ")
      );
      chip.dataset.emoji = reaction.emoji;
      chip.dataset.bot = reaction.bot ? "true" : "false";
      box.appendChild(chip);
    }
    return box;
  }

  function picker(message) {
    const box = node("div", "picker");
    for (const emoji of state.data.reaction_emoji) {
      const choice = button("pick", emoji, () => {
        state.picker = null;
        react(message, emoji);
      });
      choice.dataset.emoji = emoji;
      box.appendChild(choice);
    }
    return box;
  }

  function actions(message) {
    const bar = node("div", "actions");
    if (message.deleted) return bar;
    bar.appendChild(button("act-reply", "Reply", () => startReply(message)));
    bar.appendChild(
      button("act-react", "React", () => {
        state.picker = state.picker === message.id ? null : message.id;
        draw();
      })
    );
    if (!message.is_bot && message.from === current()) {
      bar.appendChild(button("act-edit", "Edit", () => startEdit(message)));
      bar.appendChild(button("act-delete", "Delete", () => remove(message)));
    }
    if (message.inspect) {
      const link = node("a", "inspect", "wake-up in the inspector");
      link.href = message.inspect;
      link.target = "_blank";
      link.rel = "noreferrer";
      bar.appendChild(link);
    }
    return bar;
  }

  function item(message) {
    const li = node("li", "msg " + (message.is_bot ? "bot" : "member"));
    li.dataset.messageId = String(message.id);
    li.dataset.from = message.is_bot ? "bot" : message.from;
    if (!message.is_bot && message.from === current()) li.classList.add("mine");
    if (message.deleted) li.classList.add("deleted");
    if (message.edited) li.classList.add("edited");
    const bubble = node("div", "bubble");
    const meta = node("div", "meta");
    meta.appendChild(node("span", "author", author(message)));
    if (message.is_bot) meta.appendChild(node("span", "badge", "bot"));
    meta.appendChild(node("span", "time", timeOf(message.date)));
    if (message.edited) meta.appendChild(node("span", "edited-mark", "edited"));
    bubble.appendChild(meta);
    if (message.reply_to !== null) {
      const target = byId(message.reply_to);
      const quote = node("blockquote", "reply-quote");
      quote.dataset.replyTo = String(message.reply_to);
      quote.appendChild(node("span", "author", target ? author(target) : "…"));
      quote.appendChild(node("span", "quote-text", excerpt(target)));
      bubble.appendChild(quote);
    }
    if (message.deleted) {
      const note =
        message.deleted_by === "bot"
          ? "Deleted by the bot."
          : "Deleted for the group. The bot is not told: Telegram sends bots no update when a member deletes a message.";
      bubble.appendChild(node("div", "deleted-note", note));
    } else {
      if (message.photo) {
        const img = node("img", "photo");
        img.src = message.photo.url;
        img.alt = plain("photo from " + author(message));
        img.width = Math.min(message.photo.width, 320);
        img.height = Math.round((img.width * message.photo.height) / Math.max(1, message.photo.width));
        bubble.appendChild(img);
      }
      if (message.recording) {
        const label = message.recording.kind === "voice" ? "Voice message" : message.recording.name || "Audio";
        bubble.appendChild(node("div", "recording-label", label + " · " + message.recording.duration + " s"));
        const sound = node("audio", "recording");
        sound.controls = true;
        sound.preload = "none";
        sound.src = message.recording.url;
        bubble.appendChild(sound);
      }
      if (message.text) bubble.appendChild(node("div", "text", message.text));
    }
    bubble.appendChild(reactionsOf(message));
    li.appendChild(bubble);
    li.appendChild(actions(message));
    if (state.picker === message.id) li.appendChild(picker(message));
    return li;
  }

  function draw() {
    const data = state.data;
    if (!data) return;
    syncMembers(data.members);
    const nearBottom = window.innerHeight + window.scrollY >= document.body.scrollHeight - 80;
    const count = timeline.children.length;
    timeline.replaceChildren(...data.messages.map(item));
    $("empty").hidden = data.messages.length > 0;
    $("typing").hidden = !data.typing;
    drawContext();
    if (nearBottom && data.messages.length !== count) window.scrollTo(0, document.body.scrollHeight);
  }

  function drawContext() {
    const bar = $("context-bar");
    const target = byId(state.editing !== null ? state.editing : state.replyTo);
    if (state.editing === null && state.replyTo === null) {
      bar.hidden = true;
      return;
    }
    bar.hidden = false;
    bar.dataset.mode = state.editing !== null ? "edit" : "reply";
    const lead = state.editing !== null ? ["Editing: "] : ["Replying to ", target ? author(target) : "…", ": "];
    $("context-text").replaceChildren(...lead.concat([excerpt(target)]).map(shown));
    $("send").textContent = state.editing !== null ? "Save" : "Send";
  }

  async function refresh(force) {
    let text;
    try {
      const response = await fetch("/messages", { cache: "no-store", credentials: "same-origin" });
      if (!response.ok) throw new Error("HTTP " + response.status);
      text = await response.text();
    } catch (error) {
      say("The playground does not answer (" + error.message + "); is `make up` running?", true);
      return;
    }
    if (status.classList.contains("error") && status.textContent.startsWith("The playground")) say("");
    if (text === state.raw && !force) return;
    state.raw = text;
    state.data = JSON.parse(text);
    draw();
  }

  function startReply(message) {
    state.editing = null;
    state.replyTo = message.id;
    drawContext();
    composer.focus();
  }

  function startEdit(message) {
    state.replyTo = null;
    state.editing = message.id;
    composer.value = message.text;
    drawContext();
    composer.focus();
  }

  function clearContext() {
    if (state.editing !== null) composer.value = "";
    state.editing = null;
    state.replyTo = null;
    $("send").textContent = "Send";
    drawContext();
  }

  function react(message, emoji) {
    act("/react", { user: current(), message_id: message.id, emoji: emoji });
  }

  function remove(message) {
    act("/delete", { user: current(), message_id: message.id }, "Deleted for the group; the bot is not told.");
  }

  async function send(event) {
    event.preventDefault();
    const text = composer.value;
    if (state.editing !== null) {
      if (await act("/edit", { user: current(), message_id: state.editing, text: text })) {
        composer.value = "";
        clearContext();
      }
      return;
    }
    if (!text.trim()) return;
    const body = { user: current(), text: text };
    if (state.replyTo !== null) body.reply_to = state.replyTo;
    if (await act("/say", body)) {
      composer.value = "";
      clearContext();
    }
  }

  async function upload(event) {
    const input = event.target;
    const file = input.files && input.files[0];
    if (!file) return;
    const form = new FormData();
    form.append("user", current());
    form.append("caption", state.editing === null ? composer.value : "");
    if (state.replyTo !== null) form.append("reply_to", String(state.replyTo));
    form.append("file", file, file.name);
    say(input.id === "voice-upload" ? "Sending the recording…" : "Sending the photo…");
    if (await act("/upload", form)) {
      if (state.editing === null) composer.value = "";
      clearContext();
    }
    input.value = "";
  }

  async function addMember() {
    const input = $("new-member");
    const name = input.value.trim();
    if (!name) return;
    if (await act("/members", { name: name })) {
      syncMembers(state.data ? state.data.members.concat([name]).filter((n, i, all) => all.indexOf(n) === i) : [name]);
      member.value = name;
      input.value = "";
      draw();
    }
  }

  $("compose-form").addEventListener("submit", send);
  composer.addEventListener("keydown", (event) => {
    if (event.key === "Enter" && !event.shiftKey && !event.isComposing) send(event);
    if (event.key === "Escape") clearContext();
  });
  $("cancel-context").addEventListener("click", clearContext);
  $("mention-bot").addEventListener("click", () => {
    const mention = "@" + $("mention-bot").dataset.username + " ";
    const at = composer.selectionStart || 0;
    composer.value = composer.value.slice(0, at) + mention + composer.value.slice(at);
    composer.focus();
    composer.selectionStart = composer.selectionEnd = at + mention.length;
  });
  $("upload").addEventListener("change", upload);
  $("voice-upload").addEventListener("change", upload);
  $("add-member").addEventListener("click", addMember);
  $("new-member").addEventListener("keydown", (event) => {
    if (event.key === "Enter") {
      event.preventDefault();
      addMember();
    }
  });
  member.addEventListener("change", () => {
    clearContext();
    draw();
  });

  async function loop() {
    await refresh(false);
    window.setTimeout(loop, POLL_MS);
  }
  loop();
})();
