"""The style sheet of ``report.html`` (embedded: the page is one self-contained file).

The table of contents is a sticky column on the left of a wide screen (so it is on the first
screen and stays in reach), above the page on a narrow one; wide tables scroll inside their
box, so nothing is wider than the page; key figures sit side by side.
"""

CSS = """
*{box-sizing:border-box}
body{font-family:system-ui,-apple-system,Segoe UI,sans-serif;margin:0;color:#222;
line-height:1.4;display:grid;grid-template-columns:15em minmax(0,1fr);gap:0 1.5em}
nav.toc{position:sticky;top:0;align-self:start;max-height:100vh;overflow-y:auto;
padding:.8em .6em .8em 1em;font-size:.85em;border-right:1px solid #ddd;background:#fafafa}
nav.toc ol{margin:.3em 0;padding-left:1.3em} nav.toc li{margin:.15em 0}
nav.toc a{color:#1a4d8f;text-decoration:none} nav.toc a:hover{text-decoration:underline}
.toc-title{font-weight:bold;margin:0}
main{max-width:1100px;padding:0 1em 2em 0;min-width:0}
h1{margin:.4em 0 .2em;font-size:1.4em} h2{margin:1.2em 0 .4em;font-size:1.3em}
#answers h2{margin:.5em 0 .3em}
.banner{padding:.45em .8em;border-radius:4px;margin:.3em 0;font-size:.95em;border:1px solid}
.preset-smoke{background:#fff1d6;border-color:#d98e04;color:#6b4500}
.preset-cpu{background:#e6f0fb;border-color:#5b8fd1;color:#123a66}
.preset-paper{background:#e3f6e3;border-color:#4c9a4c;color:#1c4d1c}
.preset-custom{background:#f1f1f1;border-color:#999;color:#333}
.mixed{background:#fbe3e3;border-color:#c44;color:#700}
.scroll{overflow-x:auto;max-width:100%;margin:.4em 0 1em}
table{border-collapse:collapse;font-size:.88em;width:100%}
th,td{border:1px solid #ccc;padding:.25em .45em;text-align:left;vertical-align:top;
overflow-wrap:anywhere;min-width:4em}
th{background:#f3f3f3;overflow-wrap:normal}
table.answers{font-size:.78em;line-height:1.25}
table.answers td{overflow-wrap:break-word;min-width:0}
table.answers td:first-child{width:34%} table.answers td:nth-child(2){width:13%}
table.answers td:nth-child(3){width:34%}
.unanswered{font-size:.9em;color:#444;margin:.3em 0}
img{max-width:100%;height:auto;border:1px solid #eee}
.figures{display:grid;grid-template-columns:repeat(auto-fit,minmax(22em,1fr));gap:.8em}
figure{margin:0} figcaption{font-size:.85em;color:#555}
details{margin:.4em 0} summary{cursor:pointer;color:#1a4d8f}
td details{margin:.2em 0 0;font-size:.92em} td details p{margin:.2em 0}
.v-reproduced{background:#e3f6e3}.v-not-reproduced{background:#fbe3e3}
.v-not-measured{background:#f1f1f1;color:#666}.v-inconclusive{background:#fdf5d8}
.v-smoke{background:#f6f3ee;color:#555}
.columns{font-size:.85em;color:#444}
.incomplete{color:#a00}
@media (max-width:900px){body{display:block} nav.toc{position:static;max-height:none;
border-right:0;border-bottom:1px solid #ddd} main{padding:0 1em 2em}}
"""
