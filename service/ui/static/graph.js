// The graph page: cytoscape draws the entities and facts of the page's JSON data (#graph-data).
// A click shows the clicked entity's neighbours; a double tap opens the entity's page.
(function () {
  var box = document.getElementById("graph");
  var data = JSON.parse(document.getElementById("graph-data").textContent);
  var cy = cytoscape({
    container: box,
    elements: [],
    wheelSensitivity: 0.3,
    style: [
      { selector: "node", style: { "label": "data(label)", "font-size": 14, "background-color": "#4a6fa5",
                                   "color": "#1b1f24", "text-valign": "bottom", "text-margin-y": 4 } },
      { selector: "node.selected", style: { "background-color": "#c0392b" } },
      { selector: "edge", style: { "label": "data(label)", "font-size": 12, "curve-style": "bezier",
                                   "target-arrow-shape": "triangle", "width": 1.5, "line-color": "#8899aa",
                                   "target-arrow-color": "#8899aa", "color": "#555" } },
      { selector: "edge.old", style: { "line-style": "dashed", "opacity": 0.5 } },
    ],
  });
  // add the nodes and edges not drawn yet (the page's data, or a node's neighbourhood from the server)
  function show(part) {
    var added = [];
    part.nodes.forEach(function (n) {
      if (cy.getElementById(n.id).length) { return; }
      added.push({ group: "nodes", data: { id: n.id, label: n.label }, classes: n.selected ? "selected" : "" });
    });
    part.edges.forEach(function (e) {
      if (cy.getElementById("e" + e.id).length) { return; }
      added.push({ group: "edges", data: { id: "e" + e.id, source: e.source, target: e.target, label: e.label },
                   classes: e.current ? "" : "old" });
    });
    cy.add(added);
    if (added.length) { cy.layout({ name: "cose", animate: false, fit: true, padding: 20 }).run(); }
    box.dataset.nodes = String(cy.nodes().length);
    box.dataset.edges = String(cy.edges().length);
  }
  show(data);
  cy.on("tap", "node", function (evt) {
    var url = "/ui/graph/neighbours/" + encodeURIComponent(evt.target.id()) + "?history=" + box.dataset.history;
    box.dataset.expanding = evt.target.id();
    fetch(url, { credentials: "same-origin", headers: { "Accept": "application/json" } })
      .then(function (resp) { return resp.ok ? resp.json() : { nodes: [], edges: [] }; })
      .then(function (part) { show(part); box.dataset.expanded = evt.target.id(); });
  });
  cy.on("dbltap", "node", function (evt) {
    window.location.href = "/ui/entities/" + encodeURIComponent(evt.target.id());
  });
  box.dataset.ready = "true";
})();
