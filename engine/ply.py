"""`ti.tools.PLYWriter` (also `taichi.tools.np2ply`): points and meshes as PLY files, binary
little-endian or ASCII, for Houdini, Blender or MeshLab.

Vertex and face data are added channel by channel (one numpy array per channel, or a 2-D
array whose columns become `key_1`, `key_2`, ...); `export` writes them, `export_frame`
writes `<path without .ply>_000042.ply`.
"""
import os
import warnings

import numpy as np

# PLY's scalar types and how they are stored (always little-endian here)
TYPES = {'char': '<i1', 'uchar': '<u1', 'short': '<i2', 'ushort': '<u2', 'int': '<i4', 'uint': '<u4',
         'float': '<f4', 'double': '<f8'}
VERTICES_PER_FACE = {'tri': 3, 'quad': 4}


class Channels:
    """Named columns of one PLY element (vertex or face), each of one PLY type."""

    def __init__(self, element, count):
        self.element, self.count = element, count
        self.names, self.types, self.columns = [], [], []

    def add(self, key, data_type, data):
        if data_type not in TYPES:      # Taichi skips the channel too (export_mesh.py relies on it)
            warnings.warn(f'PLYWriter: unknown data type {data_type!r} for the {self.element} channel {key!r}, '
                          f'the channel is skipped; the types are {", ".join(TYPES)}', stacklevel=3)
            return
        data = np.asarray(data.to_numpy() if hasattr(data, 'to_numpy') else data)
        columns = self._columns(key, data)
        for name, column in columns:
            if name in self.names:
                warnings.warn(f'PLYWriter: the {self.element} channel {name!r} is added twice', stacklevel=3)
            self.names.append(name)
            self.types.append(data_type)
            self.columns.append(column.astype(TYPES[data_type]))

    def _columns(self, key, data):
        """[(name, column)]: one for 1-D data, `key_1`, `key_2`, ... for the columns of 2-D data."""
        if data.ndim == 1 and data.size == self.count:
            return [(key, data)]
        # Taichi reshapes any 2-D array of the right size to (count, k), which scrambles a (k, count)
        # array: the rows must be the elements
        if data.ndim == 2 and data.shape[0] == self.count and data.size:
            return [(f'{key}_{k + 1}', data[:, k]) for k in range(data.shape[1])]
        raise ValueError(f'PLYWriter: the {self.element} channel {key!r} needs {self.count} values (a 1-D array), '
                         f'or {self.count} rows (a 2-D array); got an array of shape {data.shape}')

    def header(self):
        return [f'property {t} {name}' for t, name in zip(self.types, self.names)]

    def record_fields(self):
        return [(name, TYPES[t]) for name, t in zip(self.names, self.types)]


class PLYWriter:
    """`ti.tools.PLYWriter(num_vertices, num_faces=0, face_type='tri', comment=...)`."""

    def __init__(self, num_vertices, num_faces=0, face_type='tri', comment='created by PLYWriter'):
        if int(num_vertices) <= 0:
            raise ValueError(f'PLYWriter: num_vertices must be positive, got {num_vertices}')
        if int(num_faces) < 0:
            raise ValueError(f'PLYWriter: num_faces must not be negative, got {num_faces}')
        if face_type not in VERTICES_PER_FACE:
            raise ValueError(f"PLYWriter: face_type must be 'tri' or 'quad', got {face_type!r}")
        self.num_vertices, self.num_faces, self.face_type = int(num_vertices), int(num_faces), face_type
        self.comment = comment
        self.vertices = Channels('vertex', self.num_vertices)
        self.faces = Channels('face', self.num_faces)
        self.face_indices = None

    # --- vertices -----------------------------------------------------------------------
    def add_vertex_channel(self, key, data_type, data):
        self.vertices.add(key, data_type, data)

    def add_vertex_pos(self, x, y, z):
        for key, data in zip('xyz', (x, y, z)):
            self.vertices.add(key, 'float', data)

    def add_vertex_normal(self, nx, ny, nz):
        for key, data in zip(('nx', 'ny', 'nz'), (nx, ny, nz)):
            self.vertices.add(key, 'float', data)

    def add_vertex_color(self, r, g, b):
        """Colours as floats in [0, 1] (PLY viewers also read uchar channels named red, ...)."""
        for key, data in zip(('red', 'green', 'blue'), (r, g, b)):
            self.vertices.add(key, 'float', data)

    def add_vertex_alpha(self, alpha):
        self.vertices.add('Alpha', 'float', alpha)

    def add_vertex_rgba(self, r, g, b, a):
        self.add_vertex_color(r, g, b)
        self.add_vertex_alpha(a)

    def add_vertex_id(self):
        self.vertices.add('id', 'int', np.arange(self.num_vertices))

    def add_vertex_piece(self, piece):
        self.vertices.add('piece', 'int', piece)

    # --- faces --------------------------------------------------------------------------
    def add_faces(self, indices):
        """The vertex indices of every face, flat or one row per face."""
        indices = np.asarray(indices)
        per_face = VERTICES_PER_FACE[self.face_type]
        if indices.size != per_face * self.num_faces:
            raise ValueError(f'PLYWriter: {self.num_faces} {self.face_type} faces need {per_face * self.num_faces} '
                             f'vertex indices, got {indices.size} (an array of shape {indices.shape})')
        self.face_indices = indices.reshape(self.num_faces, per_face).astype(np.int32)

    def add_face_channel(self, key, data_type, data):
        self.faces.add(key, data_type, data)

    def add_face_id(self):
        self.faces.add('id', 'int', np.arange(self.num_faces))

    def add_face_piece(self, piece):
        self.faces.add('piece', 'int', piece)

    # --- export -------------------------------------------------------------------------
    def sanity_check(self):
        missing = [key for key in 'xyz' if key not in self.vertices.names]
        if missing:
            raise ValueError(f'PLYWriter: the vertex positions are missing (channels {", ".join(missing)}); '
                             f'add them with add_vertex_pos(x, y, z)')
        if self.num_faces and self.face_indices is None:
            raise ValueError(f'PLYWriter: {self.num_faces} faces were announced but add_faces() was not called')
        if self.num_faces:
            bad = (self.face_indices < 0) | (self.face_indices >= self.num_vertices)
            if bad.any():
                face = int(np.argwhere(bad)[0][0])
                raise ValueError(f'PLYWriter: face {face} has vertex indices {self.face_indices[face].tolist()}, '
                                 f'outside 0..{self.num_vertices - 1}')

    def _header(self, encoding):
        lines = ['ply', f'format {encoding} 1.0', f'comment {self.comment}',
                 f'element vertex {self.num_vertices}'] + self.vertices.header()
        if self.num_faces:
            lines += [f'element face {self.num_faces}', 'property list uchar int vertex_indices']
            lines += self.faces.header()
        return ('\n'.join(lines + ['end_header']) + '\n').encode('utf-8')

    def export(self, path):
        """A binary little-endian PLY file."""
        self.sanity_check()
        vertices = _records(self.vertices.record_fields(), self.vertices.columns, self.num_vertices)
        with open(path, 'wb') as f:
            f.write(self._header('binary_little_endian'))
            f.write(vertices.tobytes())
            if self.num_faces:
                per_face = VERTICES_PER_FACE[self.face_type]
                fields = [('count', '<u1'), ('indices', '<i4', (per_face,))] + self.faces.record_fields()
                columns = [np.full(self.num_faces, per_face), self.face_indices] + self.faces.columns
                f.write(_records(fields, columns, self.num_faces).tobytes())

    def export_ascii(self, path):
        """An ASCII PLY file: one line per vertex, then one per face."""
        self.sanity_check()
        rows = [' '.join(map(str, values)) for values in zip(*self.vertices.columns)]
        if self.num_faces:
            per_face = VERTICES_PER_FACE[self.face_type]
            rows += [' '.join(map(str, (per_face, *face, *values)))
                     for face, values in zip(self.face_indices.tolist(), _rows(self.faces.columns, self.num_faces))]
        with open(path, 'wb') as f:
            f.write(self._header('ascii'))
            f.write(''.join(row + '\n' for row in rows).encode('ascii'))

    def export_frame(self, series_num, path):
        """Frame `series_num` of a series: `<path without .ply>_000042.ply`, binary."""
        self.export(frame_path(series_num, path))

    def export_frame_ascii(self, series_num, path):
        self.export_ascii(frame_path(series_num, path))


def frame_path(series_num, path):
    path = os.fspath(path)
    stem = path[:-4] if path.endswith('.ply') else path
    return f'{stem}_{int(series_num):06d}.ply'


def _records(fields, columns, count):
    """The rows of an element as packed little-endian records (no padding between fields)."""
    records = np.zeros(count, dtype=np.dtype(fields))
    for (name, *_), column in zip(fields, columns):
        records[name] = column
    return records


def _rows(columns, count):
    """Each row's values (numpy scalars, so floats print in their shortest exact form)."""
    return zip(*columns) if columns else ([] for _ in range(count))


__all__ = ['PLYWriter']
