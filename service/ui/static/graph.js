// The graph page: cytoscape draws the entities and facts of the page's JSON data (#graph-data).
// A click shows the clicked entity's neighbours; a double tap opens the entity's page.
(function () {
  var box = document.getElementById("graph");
  var data = JSON.parse(document.getElementById("graph-data").textContent);
  var nodes = {};
  data.nodes.forEach(function (n) { nodes[n.id] = n; });
  var byNode = {};
  data.edges.forEach(function (e) {
    (byNode[e.source] = byNode[e.source] || []).push(e);
    (byNode[e.target] = byNode[e.target] || []).push(e);
  });
  var shown = {};
  var cy = cytoscape({
    container: box,
    elements: [],
    wheelSensitivity: 0.3,
    style: [
      { selector: "node", style: { "label": "data(label)", "font-size": 11, "background-color": "#4a6fa5",
                                   "color": "#1b1f24", "text-valign": "bottom", "text-margin-y": 4 } },
      { selector: "node.selected", style: { "background-color": "#c0392b" } },
      { selector: "edge", style: { "label": "data(label)", "font-size": 9, "curve-style": "bezier",
                                   "target-arrow-shape": "triangle", "width": 1.5, "line-color": "#8899aa",
                                   "target-arrow-color": "#8899aa", "color": "#555" } },
      { selector: "edge.old", style: { "line-style": "dashed", "opacity": 0.5 } },
    ],
  });
  function show(ids) {
    var added = [];
    ids.forEach(function (id) {
      if (shown[id] || !nodes[id]) { return; }
      shown[id] = true;
      var n = nodes[id];
      added.push({ group: "nodes", data: { id: id, label: n.label }, classes: n.selected ? "selected" : "" });
    });
    data.edges.forEach(function (e) {
      if (shown[e.source] && shown[e.target] && !cy.getElementById("e" + e.id).length) {
        added.push({ group: "edges", data: { id: "e" + e.id, source: e.source, target: e.target, label: e.label },
                     classes: e.current ? "" : "old" });
      }
    });
    cy.add(added);
    cy.layout({ name: "cose", animate: false, fit: true, padding: 20 }).run();
    box.dataset.nodes = String(cy.nodes().length);
    box.dataset.edges = String(cy.edges().length);
  }
  show(data.nodes.filter(function (n) { return n.shown; }).map(function (n) { return n.id; }));
  cy.on("tap", "node", function (evt) {
    var id = evt.target.id();
    show((byNode[id] || []).map(function (e) { return e.source === id ? e.target : e.source; }));
  });
  cy.on("dbltap", "node", function (evt) {
    window.location.href = "/ui/entities/" + encodeURIComponent(evt.target.id());
  });
  box.dataset.ready = "true";
})();
