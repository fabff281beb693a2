/* optim_names.c: DistributedOptimizer's parameters named and grouped (optim.c builds the optimizer):
 * named_parameters checked as Horovod checks them (tuples, unique names, every parameter named),
 * and the groups of its grouped all-reduces (groups=N or lists of tensors) formed the same on every
 * rank. */
#include "python/train.h"

/* named_parameters as a checked list of (name, tensor); named is None: "allreduce.noname.<i>",
 * i counting the parameters over all groups */
PyObject *hvd_opt_named_list(PyObject *named, PyObject *groups)
{
    PyObject *list = NULL, *seen = NULL, *dups = NULL;
    if (named == Py_None) {
        if (!(list = PyList_New(0))) return NULL;
        Py_ssize_t n = 0;
        for (Py_ssize_t g = 0; g < PyList_GET_SIZE(groups); g++) {
            PyObject *ps = PyDict_GetItemString(PyList_GET_ITEM(groups, g), "params");
            PyObject *seq = ps ? PySequence_Fast(ps, "params") : NULL;
            if (!seq) goto fail;
            for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(seq); i++) {
                PyObject *pair = Py_BuildValue("(NO)", PyUnicode_FromFormat("allreduce.noname.%zd", n++),
                                               PySequence_Fast_GET_ITEM(seq, i));
                if (!pair || PyList_Append(list, pair) < 0) {
                    Py_XDECREF(pair);
                    Py_DECREF(seq);
                    goto fail;
                }
                Py_DECREF(pair);
            }
            Py_DECREF(seq);
        }
        return list;
    }
    if (!(list = PySequence_List(named))) return NULL;
    if (!(seen = PySet_New(NULL)) || !(dups = PyList_New(0))) goto fail;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(list); i++) {
        PyObject *it = PyList_GET_ITEM(list, i);
        if (!PyTuple_Check(it) || PyTuple_GET_SIZE(it) != 2) {
            PyErr_SetString(PyExc_ValueError, "named_parameters should be a sequence of tuples (name, parameter), "
                                              "usually produced by model.named_parameters().");
            goto fail;
        }
        int in = PySet_Contains(seen, PyTuple_GET_ITEM(it, 0));
        if (in < 0 || (in && PyList_Append(dups, PyTuple_GET_ITEM(it, 0)) < 0) ||
            PySet_Add(seen, PyTuple_GET_ITEM(it, 0)) < 0)
            goto fail;
    }
    if (PyList_GET_SIZE(dups)) {
        PyObject *sep = PyUnicode_FromString(", "), *strs = PyList_New(0), *joined = NULL;
        for (Py_ssize_t i = 0; strs && i < PyList_GET_SIZE(dups); i++) {
            PyObject *s = PyObject_Str(PyList_GET_ITEM(dups, i));
            if (!s || PyList_Append(strs, s) < 0) Py_CLEAR(strs);
            Py_XDECREF(s);
        }
        if (sep && strs && (joined = PyUnicode_Join(sep, strs)))
            PyErr_Format(PyExc_ValueError, "Parameter names in named_parameters must be unique. Found duplicates: %U",
                         joined);
        Py_XDECREF(sep);
        Py_XDECREF(strs);
        Py_XDECREF(joined);
        goto fail;
    }
    Py_DECREF(seen);
    Py_DECREF(dups);
    return list;
fail:
    Py_XDECREF(list);
    Py_XDECREF(seen);
    Py_XDECREF(dups);
    return NULL;
}

/* every parameter of the optimizer has a name: ValueError naming the first that has none */
int hvd_opt_check_all_named(PyObject *groups, PyObject *names)
{
    for (Py_ssize_t g = 0; g < PyList_GET_SIZE(groups); g++) {
        PyObject *ps = PyDict_GetItemString(PyList_GET_ITEM(groups, g), "params");
        PyObject *seq = ps ? PySequence_Fast(ps, "params") : NULL;
        if (!seq) return -1;
        for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(seq); i++) {
            PyObject *p = PySequence_Fast_GET_ITEM(seq, i);
            int in = PyDict_Contains(names, p);
            if (in == 0) {
                PyObject *shape = PyObject_GetAttrString(p, "shape");
                PyObject *ls = shape ? PySequence_List(shape) : NULL;
                if (ls)
                    PyErr_Format(PyExc_ValueError,
                                 "named_parameters was specified, but one or more model parameters were not named: "
                                 "param_groups[%zd]['params'][%zd] (shape %S) is not among them",
                                 g, i, ls);
                Py_XDECREF(shape);
                Py_XDECREF(ls);
            }
            if (in != 1) {
                Py_DECREF(seq);
                return -1;
            }
        }
        Py_DECREF(seq);
    }
    return 0;
}

/* Horovod's split_list: n consecutive pieces, the first len % n one longer */
static PyObject *split_list(PyObject *list, Py_ssize_t n)
{
    Py_ssize_t len = PyList_GET_SIZE(list), d = len / n, r = len % n;
    PyObject *out = PyList_New(0);
    for (Py_ssize_t i = 0; out && i < n; i++) {
        Py_ssize_t a = i * d + (i < r ? i : r), b = (i + 1) * d + (i + 1 < r ? i + 1 : r);
        PyObject *sl = PyList_GetSlice(list, a, b), *t = sl ? PyList_AsTuple(sl) : NULL;
        if (!t || PyList_Append(out, t) < 0) Py_CLEAR(out);
        Py_XDECREF(sl);
        Py_XDECREF(t);
    }
    return out;
}

/* The groups of the grouped all-reduces: the parameters that need gradients, in root's order of
 * their names (every rank must form the same groups), then split in `groups` pieces or as the
 * user's lists say (parameters in none of them alone). Sets _p_to_group and _group_counts. */
int hvd_opt_form_groups(PyObject *self, PyObject *plist, PyObject *groups)
{
    PyObject *names = PyObject_GetAttrString(self, "_parameter_names"), *nl = NULL, *root = NULL, *index = NULL;
    PyObject *keyed = NULL, *sorted = NULL, *pgroups = NULL, *p2g = NULL, *counts = NULL, *gname = NULL;
    int rc = -1;
    if (!names || !(nl = PyList_New(0)) || !(index = PyDict_New()) || !(keyed = PyList_New(0))) goto done;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(plist); i++) {
        PyObject *n = PyObject_GetItem(names, PyList_GET_ITEM(plist, i));
        if (!n || PyList_Append(nl, n) < 0) {
            Py_XDECREF(n);
            goto done;
        }
        Py_DECREF(n);
    }
    if (!(gname = PyUnicode_FromString("DistributedOptimizer.groups")) ||
        !(root = hvd_tr_broadcast_object(nl, 0, gname)) || !PyList_Check(root))
        goto done;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(root); i++) {
        PyObject *iv = PyLong_FromSsize_t(i);
        if (!iv || PyDict_SetItem(index, PyList_GET_ITEM(root, i), iv) < 0) {
            Py_XDECREF(iv);
            goto done;
        }
        Py_DECREF(iv);
    }
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(plist); i++) {
        PyObject *at = PyDict_GetItemWithError(index, PyList_GET_ITEM(nl, i));
        if (!at) {
            if (!PyErr_Occurred())
                PyErr_Format(PyExc_ValueError, "DistributedOptimizer groups: parameter %S is not among rank 0's",
                             PyList_GET_ITEM(nl, i));
            goto done;
        }
        PyObject *k = Py_BuildValue("(On)", at, i); /* never compares tensors */
        if (!k || PyList_Append(keyed, k) < 0) {
            Py_XDECREF(k);
            goto done;
        }
        Py_DECREF(k);
    }
    if (PyList_Sort(keyed) < 0 || !(sorted = PyList_New(0))) goto done;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(keyed); i++) {
        Py_ssize_t at = PyLong_AsSsize_t(PyTuple_GET_ITEM(PyList_GET_ITEM(keyed, i), 1));
        if (PyList_Append(sorted, PyList_GET_ITEM(plist, at)) < 0) goto done;
    }
    if (PyLong_Check(groups)) {
        if (!(pgroups = split_list(sorted, PyLong_AsSsize_t(groups)))) goto done;
    } else {
        PyObject *grouped = PySet_New(NULL), *inlist = PySet_New(sorted);
        int ok = grouped && inlist && (pgroups = PyList_New(0));
        PyObject *git = ok ? PyObject_GetIter(groups) : NULL, *ug;
        while (git && (ug = PyIter_Next(git))) {
            PyObject *mine = PyList_New(0), *uit = PyObject_GetIter(ug), *p;
            while (mine && uit && (p = PyIter_Next(uit))) {
                int in = PySet_Contains(inlist, p);
                if (in < 0 || (in && (PyList_Append(mine, p) < 0 || PySet_Add(grouped, p) < 0))) Py_CLEAR(mine);
                Py_DECREF(p);
            }
            PyObject *t = mine && !PyErr_Occurred() ? PyList_AsTuple(mine) : NULL;
            if (!t || PyList_Append(pgroups, t) < 0) ok = 0;
            Py_XDECREF(t);
            Py_XDECREF(mine);
            Py_XDECREF(uit);
            Py_DECREF(ug);
            if (!ok) break;
        }
        Py_XDECREF(git);
        for (Py_ssize_t i = 0; ok && !PyErr_Occurred() && i < PyList_GET_SIZE(sorted); i++) {
            PyObject *p = PyList_GET_ITEM(sorted, i);
            int in = PySet_Contains(grouped, p);
            PyObject *t = in == 0 ? PyTuple_Pack(1, p) : NULL;
            if (in < 0 || (in == 0 && (!t || PyList_Append(pgroups, t) < 0))) ok = 0;
            Py_XDECREF(t);
        }
        Py_XDECREF(grouped);
        Py_XDECREF(inlist);
        if (!ok || PyErr_Occurred()) goto done;
    }
    if (!(p2g = PyObject_GetAttrString(self, "_p_to_group")) || !(counts = PyObject_GetAttrString(self, "_group_counts")))
        goto done;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(pgroups); i++) {
        PyObject *t = PyList_GET_ITEM(pgroups, i), *zero = PyLong_FromLong(0);
        int e = !zero || PyObject_SetItem(counts, t, zero) < 0;
        Py_XDECREF(zero);
        for (Py_ssize_t j = 0; !e && j < PyTuple_GET_SIZE(t); j++) e = PyObject_SetItem(p2g, PyTuple_GET_ITEM(t, j), t) < 0;
        if (e) goto done;
    }
    rc = 0;
done:
    Py_XDECREF(names);
    Py_XDECREF(nl);
    Py_XDECREF(root);
    Py_XDECREF(index);
    Py_XDECREF(keyed);
    Py_XDECREF(sorted);
    Py_XDECREF(pgroups);
    Py_XDECREF(p2g);
    Py_XDECREF(counts);
    Py_XDECREF(gname);
    return rc;
}

/* checks groups: None, an int > 0, or a list of lists of tensors, each tensor in one list at most */
int hvd_opt_check_groups(PyObject *groups)
{
    if (groups == Py_None) return 0;
    if (PyLong_Check(groups) && !PyBool_Check(groups)) {
        long n = PyLong_AsLong(groups);
        if (n > 0) return 0;
        if (n == -1 && PyErr_Occurred()) return -1;
    } else if (PyList_Check(groups)) {
        PyObject *seen = PySet_New(NULL), *tensor = hvd_tr_torch_attr("Tensor");
        int rc = seen && tensor ? 0 : -1;
        for (Py_ssize_t i = 0; rc == 0 && i < PyList_GET_SIZE(groups); i++) {
            PyObject *seq = PySequence_Fast(PyList_GET_ITEM(groups, i), "groups must be a list of lists of tensors");
            if (!seq) rc = -1;
            for (Py_ssize_t j = 0; rc == 0 && j < PySequence_Fast_GET_SIZE(seq); j++) {
                PyObject *p = PySequence_Fast_GET_ITEM(seq, j);
                int is = PyObject_IsInstance(p, tensor);
                if (is == 0) PyErr_SetString(PyExc_ValueError, "groups must consist of torch.Tensor.");
                int in = is == 1 ? PySet_Contains(seen, p) : -1;
                if (in == 1) PyErr_SetString(PyExc_ValueError, "A parameter can only appear once in groups.");
                if (in != 0 || PySet_Add(seen, p) < 0) rc = -1;
            }
            Py_XDECREF(seq);
        }
        Py_XDECREF(seen);
        Py_XDECREF(tensor);
        return rc;
    }
    PyErr_SetString(PyExc_ValueError, "groups should be a non-negative integer or a list of list of torch.Tensor.");
    return -1;
}
