// Measures every <text> of the page's SVGs as rendered and reports pairs whose boxes intersect
// and boxes that leave their SVG's viewport, as lines in <pre id="text-boxes">.
(function () {
  const lines = [];
  for (const svg of document.querySelectorAll('svg')) {
    const frame = svg.getBoundingClientRect();
    const boxes = [];
    for (const text of svg.querySelectorAll('text')) {
      if (text.textContent.trim() === '') continue;
      const r = text.getBoundingClientRect();
      boxes.push({text: text.textContent, left: r.left, top: r.top, right: r.right, bottom: r.bottom});
    }
    lines.push('TEXTS ' + boxes.length);
    const slack = 0.5;
    for (const b of boxes) {
      if (b.left < frame.left - slack || b.right > frame.right + slack || b.top < frame.top - slack ||
          b.bottom > frame.bottom + slack) {
        lines.push('OUTSIDE ' + JSON.stringify(b));
      }
    }
    for (let i = 0; i < boxes.length; ++i) {
      for (let j = i + 1; j < boxes.length; ++j) {
        const a = boxes[i], b = boxes[j];
        if (a.left < b.right && b.left < a.right && a.top < b.bottom && b.top < a.bottom) {
          lines.push('OVERLAP ' + JSON.stringify(a) + ' ' + JSON.stringify(b));
        }
      }
    }
  }
  const pre = document.createElement('pre');
  pre.id = 'text-boxes';
  pre.textContent = '\n' + lines.join('\n') + '\n';
  document.body.appendChild(pre);
})();
