// nitro replay viewer: draws a recorded soccar replay with three.js (global THREE, bundled in the page).
// Data: the JSON in <script id="replay-data">, written by nitro/monitor/replay_page.py.
// World: RocketSim's frame (z up, blue goal at -y) shown in three.js's y-up frame as (x, z, y), the
// mapping RLViser uses, so the picture has the game's handedness.
// Test hook: window.nitroViewer (setFrame, frame, numFrames, objects, ...) once window.nitroViewerReady.
"use strict";
(function () {
  const DATA = JSON.parse(document.getElementById("replay-data").textContent);
  const meta = DATA.meta;
  const BLUE = 0x2f7dff, ORANGE = 0xff8a1c, BALL_RADIUS = DATA.ball_radius;
  const TRAIL = 24; // frames of boost and ball trail

  // ---- data -------------------------------------------------------------------------------------
  function decode(entry) {
    const bin = atob(entry.b64), bytes = new Uint8Array(bin.length);
    for (let i = 0; i < bin.length; i++) bytes[i] = bin.charCodeAt(i);
    const T = {f4: Float32Array, f8: Float64Array, i1: Int8Array, u1: Uint8Array, u2: Uint16Array,
               i2: Int16Array}[entry.dtype];
    return {data: new T(bytes.buffer), shape: entry.shape};
  }
  const A = {};
  for (const [name, entry] of Object.entries(DATA.arrays)) A[name] = decode(entry);
  const E = A.tick.shape[0], F = A.tick.shape[1], C = A.car_pos.shape[2], P = meta.pad_positions.length;
  const FLAG = Object.fromEntries(meta.car_flags.map((n, i) => [n, 1 << i]));

  function vec(arr, e, f, c, width) { // element [e, f, c?] of an array with trailing size `width`
    const s = arr.shape, i = c === null ? (e * s[1] + f) : ((e * s[1] + f) * s[2] + c);
    return arr.data.subarray(i * width, i * width + width);
  }
  const D = (x, y, z) => new THREE.Vector3(x, z, y); // RocketSim -> display

  // boosting: the recorded flag when the simulator has one, else boost going down
  const hasBoostFlag = A.car_flags.data.some(v => v & FLAG.is_boosting);
  function boosting(e, f, c) {
    if (hasBoostFlag) return (vec(A.car_flags, e, f, c, 1)[0] & FLAG.is_boosting) !== 0;
    if (f === 0 || vec(A.episode_start, e, f, null, 1)[0]) return false;
    return vec(A.car_boost, e, f, c, 1)[0] < vec(A.car_boost, e, f - 1, c, 1)[0] - 1e-3;
  }

  // ---- scene ------------------------------------------------------------------------------------
  const canvas = document.getElementById("view");
  const renderer = new THREE.WebGLRenderer({canvas, antialias: true, preserveDrawingBuffer: true});
  renderer.setPixelRatio(window.devicePixelRatio || 1);
  const scene = new THREE.Scene();
  scene.background = new THREE.Color(0x10141c);
  const camera = new THREE.PerspectiveCamera(55, 1, 10, 60000);
  scene.add(new THREE.HemisphereLight(0xdde6ff, 0x30343c, 1.6));
  const sun = new THREE.DirectionalLight(0xffffff, 1.8);
  sun.position.set(3000, 8000, -2000);
  scene.add(sun);

  // arena: the collision meshes, a floor and the goal mouths
  const arenaGeo = new THREE.BufferGeometry();
  const av = decode(DATA.arena.vertices).data, ai = decode(DATA.arena.indices).data;
  const pos = new Float32Array(av.length);
  for (let i = 0; i < av.length; i += 3) { pos[i] = av[i]; pos[i + 1] = av[i + 2]; pos[i + 2] = av[i + 1]; }
  arenaGeo.setAttribute("position", new THREE.BufferAttribute(pos, 3));
  arenaGeo.setIndex(new THREE.BufferAttribute(new Uint32Array(ai), 1));
  arenaGeo.computeVertexNormals();
  const arena = new THREE.Mesh(arenaGeo, new THREE.MeshLambertMaterial({
    color: 0x59606e, transparent: true, opacity: 0.35, side: THREE.DoubleSide, depthWrite: false}));
  scene.add(arena);
  scene.add(new THREE.LineSegments(new THREE.EdgesGeometry(arenaGeo, 25),
                                   new THREE.LineBasicMaterial({color: 0x9aa3b5, transparent: true, opacity: 0.55})));
  // the floor: the field's octagon, corners cut at |x| + |y| = corner
  const fx = DATA.field.x, fy = DATA.field.y, k = DATA.field.corner;
  const outline = [[fx, k - fx], [k - fy, fy], [fy - k, fy], [-fx, k - fx], [-fx, fx - k], [fy - k, -fy],
                   [k - fy, -fy], [fx, fx - k]];
  const floorPts = [];
  outline.forEach((p, i) => { const q = outline[(i + 1) % outline.length]; floorPts.push(D(0, 0, 0), D(q[0], q[1], 0), D(p[0], p[1], 0)); });
  const floor = new THREE.Mesh(new THREE.BufferGeometry().setFromPoints(floorPts),
                               new THREE.MeshLambertMaterial({color: 0x1f4d2e, side: THREE.DoubleSide}));
  floor.geometry.computeVertexNormals();
  scene.add(floor);
  const lines = [];
  const ring = 64;
  for (let i = 0; i < ring; i++) { // centre circle and half-way line
    const a0 = 2 * Math.PI * i / ring, a1 = 2 * Math.PI * (i + 1) / ring;
    lines.push(D(1000 * Math.cos(a0), 1000 * Math.sin(a0), 1), D(1000 * Math.cos(a1), 1000 * Math.sin(a1), 1));
  }
  lines.push(D(-DATA.field.x, 0, 1), D(DATA.field.x, 0, 1));
  scene.add(new THREE.LineSegments(new THREE.BufferGeometry().setFromPoints(lines),
                                   new THREE.LineBasicMaterial({color: 0xcfd8cf})));
  for (const [sign, color] of [[-1, BLUE], [1, ORANGE]]) { // goal mouths: blue defends -y
    const g = new THREE.Mesh(new THREE.PlaneGeometry(2 * DATA.goal.half_width, DATA.goal.height),
                             new THREE.MeshBasicMaterial({color, transparent: true, opacity: 0.25,
                                                          side: THREE.DoubleSide, depthWrite: false}));
    g.position.copy(D(0, sign * DATA.field.y, DATA.goal.height / 2));
    scene.add(g);
  }

  // ball, its shadow and trail
  const ball = new THREE.Mesh(new THREE.SphereGeometry(BALL_RADIUS, 32, 16),
                              new THREE.MeshLambertMaterial({color: 0xe8e8e8}));
  ball.name = "ball";
  scene.add(ball);
  const shadow = new THREE.Mesh(new THREE.CircleGeometry(BALL_RADIUS, 32),
                                new THREE.MeshBasicMaterial({color: 0x000000, transparent: true, opacity: 0.35}));
  shadow.rotation.x = -Math.PI / 2;
  scene.add(shadow);
  function trailLine(color) {
    const g = new THREE.BufferGeometry();
    g.setAttribute("position", new THREE.BufferAttribute(new Float32Array(2 * TRAIL * 3), 3));
    const l = new THREE.LineSegments(g, new THREE.LineBasicMaterial({color, transparent: true, opacity: 0.8}));
    l.frustumCulled = false;
    scene.add(l);
    return l;
  }
  const ballTrail = trailLine(0xffffff);

  // cars: oriented hitboxes in team colours, a nose to show forward, and boost trails
  const cars = [], boostTrails = [];
  for (let c = 0; c < C; c++) {
    const [L, W, H] = meta.hitbox_size[c], team = meta.teams[c];
    const color = team === 0 ? BLUE : ORANGE;
    const car = new THREE.Group();
    car.name = "car" + c;
    const body = new THREE.Mesh(new THREE.BoxGeometry(L, H, W), new THREE.MeshLambertMaterial({color}));
    const [ox, oy, oz] = meta.hitbox_offset[c];
    body.position.set(ox, oz, oy);
    body.add(new THREE.LineSegments(new THREE.EdgesGeometry(body.geometry),
                                    new THREE.LineBasicMaterial({color: 0xffffff})));
    const nose = new THREE.Mesh(new THREE.BoxGeometry(12, H * 0.6, W * 0.6),
                                new THREE.MeshBasicMaterial({color: 0xffffff}));
    nose.position.set(ox + L / 2 + 6, oz, oy);
    car.add(body, nose);
    scene.add(car);
    cars.push(car);
    boostTrails.push(trailLine(0xffb347));
  }

  // boost pads
  const pads = [];
  for (let p = 0; p < P; p++) {
    const big = meta.pad_is_big[p];
    const pad = new THREE.Mesh(new THREE.CylinderGeometry(big ? 55 : 32, big ? 55 : 32, big ? 40 : 12, 20),
                               new THREE.MeshLambertMaterial({color: 0xffc14d}));
    const [x, y] = meta.pad_positions[p];
    pad.position.copy(D(x, y, big ? 20 : 6));
    pad.name = "pad" + p;
    scene.add(pad);
    pads.push(pad);
  }

  // ---- state of a (fractional) frame --------------------------------------------------------------
  let env = 0, frame = 0;
  const q0 = new THREE.Quaternion(), q1 = new THREE.Quaternion();
  const basis = new THREE.Matrix4(), rot = new THREE.Matrix4();

  function carQuat(e, f, c, out) {
    const q = vec(A.car_quat, e, f, c, 4);
    rot.makeRotationFromQuaternion(out.set(q[0], q[1], q[2], q[3]));
    const m = rot.elements; // column-major: columns forward, right, up in RocketSim coordinates
    const fw = D(m[0], m[1], m[2]), rt = D(m[4], m[5], m[6]), up = D(m[8], m[9], m[10]);
    basis.makeBasis(fw, up, rt); // local x forward, y up, z right
    return out.setFromRotationMatrix(basis);
  }

  function lerpVec(arr, e, f0, f1, t, c) {
    const a = vec(arr, e, f0, c, 3), b = vec(arr, e, f1, c, 3);
    return D(a[0] + (b[0] - a[0]) * t, a[1] + (b[1] - a[1]) * t, a[2] + (b[2] - a[2]) * t);
  }

  function fillTrail(line, e, f, pick, active) {
    const arr = line.geometry.attributes.position.array;
    let k = 0;
    for (let i = Math.max(1, f - TRAIL + 1); i <= f; i++) {
      if (vec(A.episode_start, e, i, null, 1)[0]) { k = 0; arr.fill(0); continue; }
      if (active && !active(i)) continue;
      const a = pick(i - 1), b = pick(i);
      arr.set([a.x, a.y, a.z, b.x, b.y, b.z], k * 6);
      k++;
    }
    line.geometry.setDrawRange(0, 2 * k);
    line.geometry.attributes.position.needsUpdate = true;
  }

  function show(e, f) {
    frame = Math.min(Math.max(f, 0), F - 1);
    env = e;
    const f0 = Math.floor(frame), f1 = Math.min(f0 + 1, F - 1);
    const t = f1 > f0 && !vec(A.episode_start, e, f1, null, 1)[0] ? frame - f0 : 0;
    ball.position.copy(lerpVec(A.ball_pos, e, f0, f1, t, null));
    shadow.position.set(ball.position.x, 2, ball.position.z);
    shadow.material.opacity = Math.max(0.08, 0.45 - ball.position.y / 4000);
    fillTrail(ballTrail, e, f0, i => lerpVec(A.ball_pos, e, i, i, 0, null));
    for (let c = 0; c < C; c++) {
      cars[c].position.copy(lerpVec(A.car_pos, e, f0, f1, t, c));
      carQuat(e, f0, c, q0);
      carQuat(e, f1, c, q1);
      cars[c].quaternion.slerpQuaternions(q0, q1, t);
      cars[c].visible = !(vec(A.car_flags, e, f0, c, 1)[0] & FLAG.is_demoed);
      fillTrail(boostTrails[c], e, f0, i => lerpVec(A.car_pos, e, i, i, 0, c), i => boosting(e, i, c));
    }
    const active = vec(A.pad_active, e, f0, null, P);
    for (let p = 0; p < P; p++) {
      pads[p].material.color.setHex(active[p] ? 0xffc14d : 0x3b3f47);
      pads[p].scale.y = active[p] ? 1 : 0.3;
    }
    updateHud(e, f0);
  }

  // ---- HUD, timeline and controls ---------------------------------------------------------------
  const $ = id => document.getElementById(id);
  const slider = $("timeline"), playBtn = $("play"), speedSel = $("speed"), envSel = $("env");
  const markers = $("markers"), clock = $("clock"), score = $("score"), boosts = $("boosts");
  slider.max = String(F - 1);
  meta.env_ids.forEach((id, i) => envSel.add(new Option(`env ${id}`, String(i))));
  const tickRate = meta.tick_rate;
  function ticksAt(e, f) { return vec(A.tick, e, f, null, 1)[0]; }

  function drawMarkers(e) {
    markers.innerHTML = "";
    for (let f = 0; f < F; f++) {
      const g = vec(A.goal, e, f, null, 1)[0], start = vec(A.episode_start, e, f, null, 1)[0];
      if (!g && !(start && f > 0)) continue;
      const m = document.createElement("div");
      m.className = g ? "goal " + (g === 1 ? "blue" : "orange") : "reset";
      m.style.left = (100 * f / Math.max(F - 1, 1)) + "%";
      m.title = g ? `${g === 1 ? "blue" : "orange"} scores (frame ${f})` : `episode start (frame ${f})`;
      m.onclick = () => { pause(); show(env, f); };
      markers.appendChild(m);
    }
  }

  function updateHud(e, f) {
    slider.value = String(f);
    let blue = 0, orange = 0;
    for (let i = 0; i <= f; i++) {
      if (vec(A.episode_start, e, i, null, 1)[0]) { blue = 0; orange = 0; }
      const g = vec(A.goal, e, i, null, 1)[0];
      if (g === 1) blue++; else if (g === 2) orange++;
    }
    score.innerHTML = `<span class="blue">${blue}</span> : <span class="orange">${orange}</span>`;
    clock.textContent = `frame ${f + 1}/${F}  tick ${ticksAt(e, f)}  ${(ticksAt(e, f) / tickRate).toFixed(2)} s`;
    boosts.innerHTML = "";
    for (let c = 0; c < C; c++) {
      const b = vec(A.car_boost, e, f, c, 1)[0];
      boosts.innerHTML += `<div class="bar ${meta.teams[c] ? "orange" : "blue"}"><span style="width:${b}%"></span>` +
                          `<em>car ${c} ${b.toFixed(0)}</em></div>`;
    }
  }

  // playback: frames advance at game speed x the chosen speed
  const secondsPerFrame = (() => {
    const d = [];
    for (let f = 1; f < F; f++) {
      const dt = ticksAt(0, f) - ticksAt(0, f - 1);
      if (dt > 0) d.push(dt);
    }
    d.sort((a, b) => a - b);
    return (d.length ? d[d.length >> 1] : 1) / tickRate;
  })();
  let playing = false, last = 0;
  function play() { playing = true; playBtn.textContent = "❚❚"; last = performance.now(); }
  function pause() { playing = false; playBtn.textContent = "▶"; }
  playBtn.onclick = () => (playing ? pause() : play());
  slider.oninput = () => { pause(); show(env, Number(slider.value)); };
  envSel.onchange = () => { drawMarkers(Number(envSel.value)); show(Number(envSel.value), frame); };
  document.addEventListener("keydown", ev => {
    if (ev.key === " ") { ev.preventDefault(); playing ? pause() : play(); }
    if (ev.key === "ArrowRight") { pause(); show(env, Math.floor(frame) + 1); }
    if (ev.key === "ArrowLeft") { pause(); show(env, Math.ceil(frame) - 1); }
  });

  // camera: drag to orbit, wheel to zoom, optional ball follow
  const orbit = {theta: Math.PI, phi: 0.95, radius: 10000, target: new THREE.Vector3(0, 0, 0)};
  let dragging = null;
  canvas.addEventListener("pointerdown", ev => { dragging = [ev.clientX, ev.clientY]; });
  window.addEventListener("pointerup", () => { dragging = null; });
  window.addEventListener("pointermove", ev => {
    if (!dragging) return;
    orbit.theta -= (ev.clientX - dragging[0]) * 0.005;
    orbit.phi = Math.min(Math.max(orbit.phi - (ev.clientY - dragging[1]) * 0.005, 0.1), 1.55);
    dragging = [ev.clientX, ev.clientY];
  });
  canvas.addEventListener("wheel", ev => {
    ev.preventDefault();
    orbit.radius = Math.min(Math.max(orbit.radius * Math.exp(ev.deltaY * 0.001), 600), 30000);
  }, {passive: false});
  function placeCamera() {
    const target = $("follow").checked ? ball.position : orbit.target;
    camera.position.set(target.x + orbit.radius * Math.sin(orbit.phi) * Math.sin(orbit.theta),
                        target.y + orbit.radius * Math.cos(orbit.phi),
                        target.z + orbit.radius * Math.sin(orbit.phi) * Math.cos(orbit.theta));
    camera.lookAt(target);
  }

  function resize() {
    const w = canvas.clientWidth, h = canvas.clientHeight;
    if (canvas.width !== Math.floor(w * renderer.getPixelRatio()) || camera.aspect !== w / h) {
      renderer.setSize(w, h, false);
      camera.aspect = w / h;
      camera.updateProjectionMatrix();
    }
  }

  function loop(now) {
    if (playing) {
      const step = (now - last) / 1000 * Number(speedSel.value) / secondsPerFrame;
      last = now;
      if (frame + step >= F - 1) { show(env, F - 1); pause(); } else show(env, frame + step);
    }
    resize();
    placeCamera();
    renderer.render(scene, camera);
    requestAnimationFrame(loop);
  }

  $("info").textContent = DATA.title;
  drawMarkers(0);
  show(0, 0);
  requestAnimationFrame(loop);

  window.nitroViewer = {
    numEnvs: E, numFrames: F, numCars: C,
    get frame() { return frame; }, get env() { return env; }, get playing() { return playing; },
    setFrame: f => { pause(); show(env, f); }, setEnv: e => { envSel.value = String(e); envSel.onchange(); },
    play, pause, render: () => { resize(); placeCamera(); renderer.render(scene, camera); },
    objects: {ball, cars, pads, arena, floor}, scene, camera,
    markers: () => Array.from(markers.children).map(m => ({cls: m.className, left: m.style.left})),
  };
  window.nitroViewerReady = true;
})();
